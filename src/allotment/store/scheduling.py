"""The SQL implementation of the engine's Store port (ports/store.py) on SQLite and PostgreSQL.

Owns: the transaction boundaries of the engine — recording executor events, the atomic cycle (period rollover,
cancellations, snapshot, decide, apply, charges, fair-share usage, pending reasons), the intent outbox and the
queries the engine's loop and reconciliation need.

Must not: decide (the policy does), or call the executor (the engine delivers intents after commit).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from allotment.core.decisions import Decisions
from allotment.core.model import Allocation, Micro, PolicyConfig, Seconds
from allotment.ledger.charges import Meter, accrue
from allotment.ledger.periods import PeriodSpec, Rollover, period_at
from allotment.ledger.usage import usage_after
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec
from allotment.ports.store import CycleReport, Decide, Intent, IntentKind
from allotment.store.accounts import open_period, post
from allotment.store.apply import Applier, end_run, open_run, write_reasons
from allotment.store.db import in_batches, reading
from allotment.store.records import get_state, set_state, transition
from allotment.store.snapshot import SnapshotCache, load_snapshot
from allotment.store.tables import BudgetUsageRow, IntentRow, JobRow, PeriodRow, RunRow


@dataclass(frozen=True, slots=True)
class Accounting:
    """How money and usage are kept: the period calendar, what a new period inherits, and how often open runs are
    charged (they are always charged when they end or change price)."""

    period: PeriodSpec
    rollover: Rollover = field(default_factory=Rollover)
    charge_every: Seconds = 300


class SqlSchedulingStore:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        policy: PolicyConfig,
        rates: Mapping[str, Micro],
        accounting: Accounting,
    ) -> None:
        self.sessions = sessions
        self.policy = policy
        self.rates = dict(rates)
        self.accounting = accounting
        self._reasons: dict[str, tuple[object, ...]] = {}
        self._snapshot_cache = SnapshotCache()

    # -- executor events ---------------------------------------------------------------------------------------
    def record_events(self, events: Sequence[ExecutorEvent], now: Seconds) -> int:
        changed = 0
        if not events:
            return 0
        with self.sessions.begin() as session:
            self._ensure_period(session, now)
            ending = sorted({ev.job_id for ev in events if ev.kind in (EventKind.EXITED, EventKind.LOST)})
            # runs that end are charged under their row lock, taken here for the whole batch in one read
            runs = self._runs_of(session, {(ev.job_id, ev.attempt) for ev in events}, lock=bool(ending))
            jobs: dict[str, JobRow] = {}  # held here: the session keeps unchanged rows only weakly
            for batch in in_batches(ending):
                jobs.update((j.id, j) for j in session.scalars(select(JobRow).where(JobRow.id.in_(batch))))
            for ev in events:
                run = runs.get((ev.job_id, ev.attempt))
                if run is None or run.ended_at is not None:
                    continue  # an event for a run already closed (a repeat after a restart) changes nothing
                if ev.kind is EventKind.STARTED:
                    if run.confirmed_at is None:
                        run.confirmed_at = ev.at
                        changed += 1
                elif ev.kind in (EventKind.EXITED, EventKind.LOST):
                    job = jobs[ev.job_id]
                    detail = "node lost" if ev.kind is EventKind.LOST else ev.detail
                    at = min(max(ev.at, run.started_at), now)
                    end_run(session, job, run, at, ev.exit_code, detail, self.policy, locked=True)
                    changed += 1
                elif ev.kind is EventKind.ATTACHED:
                    run.idle_since = None
                elif ev.kind is EventKind.DETACHED:
                    run.idle_since = ev.at
        return changed

    @staticmethod
    def _runs_of(session: Session, keys: set[tuple[str, int]], lock: bool = False) -> dict[tuple[str, int], RunRow]:
        """The runs of these (job, attempt) pairs that exist, read in a few queries rather than one per event; with
        `lock`, under row locks (FOR UPDATE on PostgreSQL, in job order)."""
        jobs = sorted({job_id for job_id, _ in keys})
        attempts = sorted({attempt for _, attempt in keys})
        found: dict[tuple[str, int], RunRow] = {}
        stmt = _RUNS_OF_LOCKED if lock else _RUNS_OF
        for batch in in_batches(jobs):
            for run in session.scalars(stmt, {"jobs": batch, "attempts": attempts}):
                if (run.job_id, run.attempt) in keys:
                    found[(run.job_id, run.attempt)] = run
        return found

    # -- the cycle ---------------------------------------------------------------------------------------------
    def cycle(self, decide: Decide, now: Seconds) -> CycleReport:
        timings: dict[str, float] = {}
        with self.sessions.begin() as session:
            t0 = time.perf_counter()
            period = self._ensure_period(session, now)
            self._advance_usage(session, now)
            cancelled = self._cancellations(session, now)
            snap = load_snapshot(session, now, self.policy, self.rates, period, self._snapshot_cache)
            t1 = time.perf_counter()
            decisions = decide(snap, now)
            t2 = time.perf_counter()
            applier = Applier(session, now, self.policy, self.rates)
            applier.apply(decisions)
            charged = self._charge_due(session, now, period)
            write_reasons(session, decisions.pending, {s.job_id for s in decisions.starts}, now, self._reasons)
            set_state(session, "last_cycle", now)
            set_state(session, "standings", standings_json(decisions))
            t3 = time.perf_counter()
        timings.update(load=t1 - t0, decide=t2 - t1, apply=t3 - t2)
        return CycleReport(now, decisions, applier.intents + cancelled, charged, timings)

    def _ensure_period(self, session: Session, now: Seconds) -> str:
        """The id of the open period holding `now`, rolling over (charging open runs up to the boundary in the
        old period first) when a new period has begun."""
        period = period_at(self.accounting.period, now)
        current = get_state(session, "period")
        if current != period.id:
            old = session.get(PeriodRow, current) if current is not None else None
            if old is not None and not old.closed:
                self._charge_open_runs(session, old.end, old.id)
            open_period(session, self.accounting.period, now, self.accounting.rollover)
            set_state(session, "period", period.id)
        return period.id

    def _charge_open_runs(
        self, session: Session, until: Seconds, period_id: str, due_before: Seconds | None = None
    ) -> Micro:
        total = 0
        rows = (
            session.execute(_OPEN_RUNS_BUDGETS)
            if due_before is None
            else session.execute(_DUE_RUNS_BUDGETS, {"due_before": due_before})
        )
        for run, budget in rows.all():
            meter = Meter(run.id, run.job_id, budget, run.rate_micro, run.price, run.price_since, run.charged_until)
            entry, advanced = accrue(meter, until, period_id)
            run.charged_until = advanced.charged_until
            if entry is not None and post(session, entry):
                total -= entry.amount
        return total

    def _charge_due(self, session: Session, now: Seconds, period_id: str) -> Micro:
        return self._charge_open_runs(session, now, period_id, due_before=now - self.accounting.charge_every)

    def _advance_usage(self, session: Session, now: Seconds) -> None:
        """Bring every budget's decayed fair-share usage to `now`, adding what its open runs held since the last
        cycle (at full price, in credits)."""
        last = get_state(session, "usage_at")
        held: dict[str, Micro] = {}
        for budget, rate in session.execute(_HELD_RATES):
            held[budget] = int(rate)
        if last is not None and now <= last:
            return
        rows = {r.budget: r for r in session.scalars(_USAGE_ROWS)}
        half = self.policy.usage_half_life
        for budget in set(rows) | set(held):
            row = rows.get(budget)
            if row is None:
                session.add(BudgetUsageRow(budget=budget, usage=0.0, as_of=now))
                continue
            if now > row.as_of:
                row.usage = usage_after(row.usage, row.as_of, now, half, held.get(budget, 0))
                row.as_of = now
        set_state(session, "usage_at", now)

    def _cancellations(self, session: Session, now: Seconds) -> int:
        """Act on cancellations users asked for: pending jobs end now; running ones are told to leave."""
        intents = 0
        for job in session.scalars(_CANCELLING):
            run = open_run(session, job.id)
            if run is None:
                transition(session, job, "cancelled", now, "cancelled by its owner")
                continue
            if run.signalled_at is None:
                grace = min(job.grace, self.policy.max_grace)
                run.signalled_at, run.kill_at, run.preempt_reason, run.requeue = now, now + grace, "cancelled", False
                session.add(
                    IntentRow(
                        job_id=job.id,
                        run_id=run.id,
                        attempt=run.attempt,
                        kind="terminate",
                        payload={"grace": grace},
                        created_at=now,
                    )
                )
                transition(session, job, "preempting", now, f"cancelling: grace {grace}s")
                intents += 1
        return intents

    # -- outbox and reconciliation -----------------------------------------------------------------------------
    def undelivered(self) -> list[Intent]:
        with reading(self.sessions) as session:
            rows = session.scalars(_UNDELIVERED)
            return [intent_of(r) for r in rows]

    def mark_delivered(self, ids: Sequence[int], at: Seconds) -> None:
        if not ids:
            return
        with self.sessions.begin() as session:
            session.execute(_MARK_DELIVERED, {"ids": list(ids), "at": at})

    def open_runs(self) -> Mapping[str, int]:
        with reading(self.sessions) as session:
            return dict(session.execute(_OPEN_ATTEMPTS).all())

    def next_deadline(self, now: Seconds) -> Seconds | None:
        with reading(self.sessions) as session:
            times = [session.scalar(_NEXT_SLICE_END, {"now": now}), session.scalar(_NEXT_KILL, {"now": now})]
        found = [int(t) for t in times if t is not None]
        return min(found) if found else None


# The statements the engine runs every cycle or loop, each built once (decision 39): building a statement afresh and
# computing its compiled-cache key cost more Python time than SQLite takes to run it.
_RUNS_OF = select(RunRow).where(
    RunRow.job_id.in_(bindparam("jobs", expanding=True)), RunRow.attempt.in_(bindparam("attempts", expanding=True))
)
_RUNS_OF_LOCKED = _RUNS_OF.order_by(RunRow.job_id, RunRow.attempt).with_for_update()
_OPEN_RUNS_BUDGETS = (
    select(RunRow, JobRow.budget).join(JobRow, JobRow.id == RunRow.job_id).where(RunRow.ended_at.is_(None))
)
_DUE_RUNS_BUDGETS = _OPEN_RUNS_BUDGETS.where(RunRow.charged_until <= bindparam("due_before"))
_HELD_RATES = (
    select(JobRow.budget, func.sum(RunRow.rate_micro))
    .join(RunRow, RunRow.job_id == JobRow.id)
    .where(RunRow.ended_at.is_(None))
    .group_by(JobRow.budget)
)
_USAGE_ROWS = select(BudgetUsageRow)
_CANCELLING = select(JobRow).where(
    JobRow.cancel_requested_at.is_not(None), JobRow.state.in_(("pending", "running", "preempting"))
)
_UNDELIVERED = select(IntentRow).where(IntentRow.delivered_at.is_(None)).order_by(IntentRow.id)
_MARK_DELIVERED = (
    update(IntentRow).where(IntentRow.id.in_(bindparam("ids", expanding=True))).values(delivered_at=bindparam("at"))
)
_OPEN_ATTEMPTS = select(RunRow.job_id, RunRow.attempt).where(RunRow.ended_at.is_(None))
_NEXT_SLICE_END = select(func.min(RunRow.slice_end)).where(
    RunRow.ended_at.is_(None), RunRow.slice_end > bindparam("now")
)
_NEXT_KILL = select(func.min(RunRow.kill_at)).where(RunRow.ended_at.is_(None), RunRow.kill_at > bindparam("now"))


def intent_of(row: IntentRow) -> Intent:
    kind = IntentKind(row.kind)
    if kind is IntentKind.TERMINATE:
        return Intent(row.id, kind, row.job_id, row.attempt, None, int(row.payload.get("grace", 0)))
    p = row.payload
    spec = LaunchSpec(
        job_id=p["job_id"],
        attempt=int(p["attempt"]),
        command=tuple(p["command"]),
        placement=tuple(Allocation(a["node"], tuple(a["gpus"])) for a in p["placement"]),
        budget=p["budget"],
        user=p["user"],
        kind=p["kind"],
        grace=int(p["grace"]),
        slice_end=p["slice_end"],
        env=dict(p.get("env") or {}),
        workdir=p.get("workdir"),
        image=p.get("image"),
    )
    return Intent(row.id, kind, row.job_id, row.attempt, spec, spec.grace)


def standings_json(decisions: Decisions) -> dict[str, dict[str, float | int]]:
    """Each leaf budget's fair-share standing as the cycle computed it (shown by `why` and the dashboard)."""
    return {
        name: {
            "balance": st.balance,
            "committed": st.committed,
            "entitled": round(st.entitled, 6),
            "used": round(st.used, 6),
            "ratio": round(st.ratio, 4) if st.ratio != float("inf") else -1,
        }
        for name, st in decisions.standings.items()
    }
