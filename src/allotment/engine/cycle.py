"""The engine cycle: how a pure decision becomes durable state and running processes.

Owns: the order of one cycle, its named steps, and the reconciliation after a restart. One cycle:

 1. now              — read the clock (the only clock read of the cycle)
 2. hear             — poll the executor and record what it reports (started, exited with code, lost with its
                       node) in one transaction: changes.events.event_changes (runs ended, charged, refunded on a
                       fleet fault, their jobs moved on)
 then, in ONE transaction (`store.transaction(now, cycle=True)`), with the cyclic garbage collector paused
 (collector.py):
 3. period rollover  — when a new budget period began: open runs charged to the old period's end in it
                       (changes.steps.rollover_charges), then the new period opened and funded
 4. usage decay      — every budget's fair-share usage decayed to now plus what its runs held
                       (changes.steps.decay_usage)
 5. snapshot         — the store loads the scheduling snapshot (the pending jobs the eligibility gate keeps out,
                       held or waiting for a dependency, are left out with their reasons: changes.eligibility);
                       each cluster's session room is sized from the session demand kept in the engine state
                       (changes.room) and passed in it
 6. decide           — the policy's decide(snapshot, now); cancellations are decisions (core/cancellation.py)
 7. change set       — what the decisions mean (changes.decisions.decision_changes), the pending jobs whose
                       cancellation was asked (changes.decisions.cancelled_pending) and those whose dependency can
                       never be satisfied (changes.decisions.never_satisfied), cancelled
 8. periodic charges — open runs not charged for `charge_every` are charged to now (changes.steps.periodic_charges)
 9. reasons          — the pending reasons that changed since they were last written (changes.steps.reason_changes)
10. persist          — the store writes the change set, intents and the session-demand statistic included (an
                       outbox)
11. deliver          — hand the undelivered intents to the executor (launch is idempotent per attempt, terminate
                       keeps its first deadline), then mark them delivered

A crash between 10 and 11 leaves intents undelivered: the next cycle delivers them. A crash inside 3–10 leaves
nothing of that cycle. `reconcile()` runs once at start-up: it records what happened while the engine was down and
treats runs the executor no longer knows as lost (refunded, requeued), and ends processes the store no longer knows.

Must not: make scheduling decisions (the policy does), compute what a decision or an event means (allotment.changes
does), price anything (allotment.ledger does) or touch rows (the store's unit of work does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from allotment.changes.decisions import cancelled_pending, decision_changes, never_satisfied
from allotment.changes.events import event_changes
from allotment.changes.records import ChangeSet
from allotment.changes.room import DEMAND_KEY, ROOM_KEY, advance, demand_sample, room_sizes, rooms_json, with_rooms
from allotment.changes.steps import (
    decay_usage,
    held_rates,
    periodic_charges,
    reason_changes,
    rollover_charges,
    standings_json,
)
from allotment.changes.unit import CycleUnit
from allotment.core.decisions import PreemptReason
from allotment.core.model import Seconds
from allotment.core.policy import Policy
from allotment.engine.collector import collector_paused
from allotment.ledger.periods import period_at
from allotment.ports.clock import Clock
from allotment.ports.executor import EventKind, Executor, ExecutorEvent
from allotment.ports.store import CycleReport, Decide, IntentKind, SchedulingStore

CycleStore = SchedulingStore[CycleUnit]

log = logging.getLogger("allotment.engine")


@dataclass
class Engine:
    store: CycleStore
    executor: Executor
    clock: Clock
    policy: Policy

    def reconcile(self) -> None:
        """After a restart: hear what the executor reported while nobody listened, deliver intents left behind,
        then settle runs the store and the executor disagree about."""
        now = self.clock.now()
        hear(self.store, self.executor.poll(), now)
        self.deliver()
        alive = self.executor.alive()
        opened = self.store.open_runs()
        lost = [
            ExecutorEvent(job_id, attempt, EventKind.LOST, now, None, "not running after a restart")
            for job_id, attempt in opened.items()
            if alive.get(job_id) != attempt
        ]
        if lost:
            log.warning("reconcile: %d runs were not running after a restart", len(lost))
            hear(self.store, self.executor.poll() + lost, now)
        for job_id, attempt in alive.items():
            if opened.get(job_id) != attempt:
                log.warning("reconcile: ending orphan %s attempt %s", job_id, attempt)
                self.executor.terminate(job_id, attempt, 0)

    def step(self) -> CycleReport:
        now = self.clock.now()
        hear(self.store, self.executor.poll(), now)
        with collector_paused():  # decide + apply allocate much short-lived garbage (engine/collector.py)
            report = cycle(self.store, self.policy.decide, now)
        self.deliver()
        return report

    def deliver(self) -> int:
        intents = self.store.undelivered()
        done: list[int] = []
        for intent in intents:
            if intent.kind is IntentKind.LAUNCH and intent.spec is not None:
                self.executor.launch(intent.spec)
            elif intent.kind is IntentKind.TERMINATE:
                self.executor.terminate(intent.job_id, intent.attempt, intent.grace)
            done.append(intent.id)
        self.store.mark_delivered(done, self.clock.now())
        return len(done)

    def run(self, stop: threading.Event, wake: threading.Event, interval: float = 5.0, poll: float = 0.5) -> None:
        """Cycle until `stop` is set: at once when `wake` is set (a submission, a drain), when the executor reports
        something, at the next slice end or kill deadline, when the policy asked to decide again (Decisions.wake_at),
        and at least every `interval` engine seconds. `poll` is how often (wall seconds) the executor is asked for
        news in between."""
        self.reconcile()
        while not stop.is_set():
            report = self.step()
            log.info(
                "cycle at %s: %d starts, %d preemptions, %d renewals, %d pending; load %.0f ms, decide %.0f ms, "
                "apply %.0f ms",
                report.now,
                len(report.decisions.starts),
                len(report.decisions.preempts),
                len(report.decisions.renews),
                len(report.decisions.pending),
                1000 * report.timings.get("load", 0),
                1000 * report.timings.get("decide", 0),
                1000 * report.timings.get("apply", 0),
            )
            due = [self.store.next_deadline(report.now), report.decisions.wake_at]
            until = min([report.now + interval, *(t for t in due if t is not None)])
            self._wait(stop, wake, until, poll)

    def _wait(self, stop: threading.Event, wake: threading.Event, until: float, poll: float) -> None:
        """Wait until engine time `until`, waking early for `wake`, `stop` or an executor event; `poll` is in wall
        seconds (how often the executor is asked)."""
        while not stop.is_set() and self.clock.now() < until:
            if wake.wait(timeout=poll):
                wake.clear()
                return
            events = self.executor.poll()
            if events:
                hear(self.store, events, self.clock.now())
                return


def period_rollover(tx: CycleUnit, now: Seconds) -> str:
    """Step 3: the id of the open period holding `now`, rolling over (open runs charged up to the boundary in the
    old period first, then the new period opened) when a new period has begun."""
    period = period_at(tx.rules.accounting.period, now)
    current = tx.state("period")
    if current != period.id:
        old = tx.period(str(current)) if current is not None else None
        if old is not None and not old[1]:
            tx.persist(rollover_charges(tx.open_meters(), old[0]))
        tx.open_period(now)
        tx.persist(ChangeSet(state={"period": period.id}))
    return period.id


def hear(store: CycleStore, events: Sequence[ExecutorEvent], now: Seconds) -> int:
    """Step 2: record what the executor reported, in one transaction; returns how many runs changed state."""
    if not events:
        return 0
    with store.transaction(now) as tx:
        period_id = period_rollover(tx, now)
        ending = any(ev.kind in (EventKind.EXITED, EventKind.LOST) for ev in events)
        runs = tx.runs_of({(ev.job_id, ev.attempt) for ev in events}, lock=ending)
        ended = [
            runs[k]
            for ev in events
            if ev.kind in (EventKind.EXITED, EventKind.LOST)
            if (k := (ev.job_id, ev.attempt)) in runs
        ]
        jobs = tx.jobs({r.job_id for r in ended})
        charged = tx.charged({r.run_id for r in ended})
        changes = event_changes(events, runs, jobs, charged, now, period_id)
        tx.persist(changes)
    return len(changes.ended) + sum(1 for t in changes.touched if t.confirmed_at is not None)


def cycle(store: CycleStore, decide: Decide, now: Seconds) -> CycleReport:
    """Steps 3–10: one atomic scheduling cycle."""
    with store.transaction(now, cycle=True) as tx:
        t0 = time.perf_counter()
        rules = tx.rules
        period_id = period_rollover(tx, now)
        meters = tx.open_meters()
        last = tx.state("usage_at")
        tx.persist(
            decay_usage(
                tx.usage(), held_rates(meters), last if isinstance(last, int) else None, now,
                rules.policy.usage_half_life,
            )
        )  # fmt: skip
        snap = tx.snapshot(period_id)
        demand = advance(tx.state(DEMAND_KEY), demand_sample(snap), now, rules.policy.room_window)
        rooms = room_sizes(demand, snap)
        snap = with_rooms(snap, rooms)
        t1 = time.perf_counter()
        decisions = decide(snap, now)
        t2 = time.perf_counter()
        named = {s.job_id for s in decisions.starts} | {p.job_id for p in decisions.preempts}
        jobs = tx.jobs(named)
        runs = {r.job_id: r for r in meters}
        lost = [
            runs[p.job_id].run_id
            for p in decisions.preempts
            if p.reason is PreemptReason.NODE_DOWN and p.job_id in runs
        ]
        charged = tx.charged(lost) if lost else {}
        changes = cancelled_pending(tx.cancelled_pending(), now)
        doomed = tx.unsatisfiable()
        if doomed:
            changes += never_satisfied(tx.jobs(doomed), doomed, now)
        changes += decision_changes(snap, decisions, now, rules, runs, jobs, charged, period_id)
        changes += periodic_charges(meters, changes, now, period_id, rules.accounting.charge_every)
        changes += reason_changes(decisions, now, tx.reason_memo, tx.gated())
        changes.state.update(last_cycle=now, standings=standings_json(decisions))
        changes.state.update({DEMAND_KEY: demand, ROOM_KEY: rooms_json(rooms)})
        tx.persist(changes)
        t3 = time.perf_counter()
    report = CycleReport(
        now, decisions, len(changes.intents), changes.charged, {"load": t1 - t0, "decide": t2 - t1, "apply": t3 - t2}
    )
    store.cycled(report)
    return report
