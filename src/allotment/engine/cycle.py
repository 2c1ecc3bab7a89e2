"""The engine cycle: how a pure decision becomes durable state and running processes.

Owns: the order of one cycle and the reconciliation after a restart. One cycle:

 1. now            — read the clock (the only clock read of the cycle)
 2. hear           — poll the executor and record what it reports (started, exited with code, lost with its node)
                     in one transaction
 3. decide + apply — in ONE transaction (Store.cycle), with the cyclic garbage collector paused (collector.py):
                     roll the budget period over if one began, advance fair-share usage, act on cancellations, load
                     the snapshot, call the policy's decide(snapshot, now), apply the decisions (job transitions with
                     reasons, runs, slices, reservations, ledger charges, pending reasons) and record executor
                     commands as intents (an outbox)
 4. deliver        — hand the undelivered intents to the executor (launch is idempotent per attempt, terminate
                     keeps its first deadline), then mark them delivered

A crash between 3 and 4 leaves intents undelivered: the next cycle delivers them. A crash inside 3 leaves nothing
of that cycle. `reconcile()` runs once at start-up: it records what happened while the engine was down and treats
runs the executor no longer knows as lost (refunded, requeued), and ends processes the store no longer knows.

Must not: make scheduling decisions (the policy does) or touch rows directly (the Store port does).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from allotment.core.policy import Policy
from allotment.engine.collector import collector_paused
from allotment.ports.clock import Clock
from allotment.ports.executor import EventKind, Executor, ExecutorEvent
from allotment.ports.store import CycleReport, IntentKind, SchedulingStore

log = logging.getLogger("allotment.engine")


@dataclass
class Engine:
    store: SchedulingStore
    executor: Executor
    clock: Clock
    policy: Policy

    def reconcile(self) -> None:
        """After a restart: hear what the executor reported while nobody listened, deliver intents left behind,
        then settle runs the store and the executor disagree about."""
        now = self.clock.now()
        self.store.record_events(self.executor.poll(), now)
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
            self.store.record_events(self.executor.poll() + lost, now)
        for job_id, attempt in alive.items():
            if opened.get(job_id) != attempt:
                log.warning("reconcile: ending orphan %s attempt %s", job_id, attempt)
                self.executor.terminate(job_id, attempt, 0)

    def step(self) -> CycleReport:
        now = self.clock.now()
        self.store.record_events(self.executor.poll(), now)
        with collector_paused():  # decide + apply allocate much short-lived garbage (engine/collector.py)
            report = self.store.cycle(self.policy.decide, now)
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
                self.store.record_events(events, self.clock.now())
                return
