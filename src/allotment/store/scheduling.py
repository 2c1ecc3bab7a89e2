"""The SQL implementation of the engine's Store port (ports/store.py) on SQLite and PostgreSQL.

Owns: the transaction boundaries of the engine — `transaction(now)` opens one transaction and yields a unit of work
(allotment.changes.unit.CycleUnit) whose loads read this database and whose `persist` writes a ChangeSet
(store/persist.py) — and the intent outbox and the queries the engine's loop and reconciliation need.

Must not: decide, order the cycle's steps or compute what a decision or an event means (allotment.engine.cycle and
allotment.changes do), price anything (allotment.ledger does), or call the executor (the engine delivers intents
after commit).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from allotment.changes.intents import decode
from allotment.changes.records import Accounting, ChangeSet, JobFacts, OpenRun, Rules
from allotment.changes.steps import ReasonValues
from allotment.core.decisions import WaitReason
from allotment.core.jobstate import JobState
from allotment.core.model import Micro, PolicyConfig, Seconds, Snapshot
from allotment.ledger.periods import Period
from allotment.ports.executor import ArrayPosition
from allotment.ports.store import CycleReport, Intent
from allotment.store.accounts import open_period
from allotment.store.db import in_batches, reading
from allotment.store.metering import METER_COLUMNS, charged_totals, open_run_of
from allotment.store.persist import persist
from allotment.store.records import get_state
from allotment.store.snapshot import SnapshotCache, load_snapshot
from allotment.store.tables import BudgetUsageRow, IntentRow, JobRow, PeriodRow, RunRow

__all__ = ["Accounting", "SqlCycle", "SqlSchedulingStore", "intent_of"]


class SqlSchedulingStore:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        policy: PolicyConfig,
        rates: Mapping[str, Micro],
        accounting: Accounting,
    ) -> None:
        self.sessions = sessions
        self.rules = Rules(policy, dict(rates), accounting)
        self._reasons: dict[str, ReasonValues] = {}
        self._snapshot_cache = SnapshotCache()

    @property
    def policy(self) -> PolicyConfig:
        return self.rules.policy

    @property
    def accounting(self) -> Accounting:
        return self.rules.accounting

    @contextmanager
    def transaction(self, now: Seconds, *, cycle: bool = False) -> Iterator[SqlCycle]:
        """One transaction as a unit of work: committed when the block ends, rolled back when it raises. `cycle`:
        it is a scheduling cycle (an observer paces and times those; this store treats all alike)."""
        with self.sessions.begin() as session:
            yield SqlCycle(session, now, self.rules, self._reasons, self._snapshot_cache)

    def cycled(self, report: CycleReport) -> None:
        """Told after each committed cycle (an observer counts them; this store keeps nothing)."""

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


class SqlCycle:
    """The unit of work of one transaction (allotment.changes.unit.CycleUnit): loads, and persist."""

    def __init__(
        self,
        session: Session,
        now: Seconds,
        rules: Rules,
        reasons: dict[str, ReasonValues],
        snapshot_cache: SnapshotCache,
    ) -> None:
        self.session = session
        self.now = now
        self._rules = rules
        self._reasons = reasons
        self._snapshot_cache = snapshot_cache
        self._snapped = False

    @property
    def rules(self) -> Rules:
        return self._rules

    @property
    def reason_memo(self) -> MutableMapping[str, ReasonValues]:
        return self._reasons

    def state(self, key: str) -> object:
        value: object = get_state(self.session, key)
        return value

    def period(self, period_id: str) -> tuple[Period, bool] | None:
        row = self.session.get(PeriodRow, period_id)
        return None if row is None else (Period(row.id, row.start, row.end), bool(row.closed))

    def open_period(self, at: Seconds) -> Period:
        acc = self._rules.accounting
        return open_period(self.session, acc.period, at, acc.rollover)

    def open_meters(self) -> list[OpenRun]:
        return [open_run_of(row) for row in self.session.connection().execute(_OPEN_METERS)]

    def usage(self) -> Mapping[str, tuple[float, Seconds]]:
        return {budget: (usage, as_of) for budget, usage, as_of in self.session.connection().execute(_USAGE_ROWS)}

    def snapshot(self, period_id: str) -> Snapshot:
        p = self._rules
        snap = load_snapshot(self.session, self.now, p.policy, p.rates, period_id, self._snapshot_cache)
        self._snapped = True
        return snap

    def jobs(self, ids: Iterable[str]) -> dict[str, JobFacts]:
        found: dict[str, JobFacts] = {}
        conn = self.session.connection()
        for batch in in_batches(sorted(set(ids))):
            found.update((row[0], _facts(row)) for row in conn.execute(_JOB_FACTS, {"ids": batch}))
        return found

    def cancelled_pending(self) -> list[JobFacts]:
        asked = self._snapshot_cache.cancelled_pending if self._snapped else None
        if asked is not None:  # the snapshot read every active job's state and request: no second scan
            return list(self.jobs(asked).values()) if asked else []
        return [_facts(row) for row in self.session.connection().execute(_CANCELLED_PENDING)]

    def gated(self) -> Mapping[str, WaitReason]:
        return self._snapshot_cache.gated if self._snapped else {}

    def unsatisfiable(self) -> Mapping[str, str]:
        return self._snapshot_cache.unsatisfiable if self._snapped else {}

    def runs_of(self, keys: Iterable[tuple[str, int]], lock: bool) -> dict[tuple[str, int], OpenRun]:
        wanted = set(keys)
        jobs = sorted({job_id for job_id, _ in wanted})
        attempts = sorted({attempt for _, attempt in wanted})
        stmt = _RUNS_OF_LOCKED if lock else _RUNS_OF
        found: dict[tuple[str, int], OpenRun] = {}
        conn = self.session.connection()
        for batch in in_batches(jobs):
            for row in conn.execute(stmt, {"jobs": batch, "attempts": attempts}):
                run = open_run_of(row)
                if (run.job_id, run.attempt) in wanted:
                    found[(run.job_id, run.attempt)] = run
        return found

    def charged(self, run_ids: Iterable[str]) -> dict[str, Micro]:
        return charged_totals(self.session, run_ids)

    def persist(self, changes: ChangeSet) -> None:
        persist(self.session, changes, self.now)


def _facts(row: Any) -> JobFacts:
    job_id, state, budget, user, kind, grace, attempt, requeue, cancel, spec, gpus, cpus, memory = row
    spec = spec or {}
    return JobFacts(
        job_id, JobState(state), budget, user, kind, grace, attempt, bool(requeue), cancel is not None,
        tuple(spec.get("command", ())), dict(spec.get("env") or {}), spec.get("workdir"), spec.get("image"),
        gpus, cpus, memory, ArrayPosition.of(spec.get("array")),
    )  # fmt: skip


# The statements the engine runs every cycle or loop, each built once (decision 39): building a statement afresh and
# computing its compiled-cache key cost more Python time than SQLite takes to run it.
_OPEN_METERS = (
    select(*METER_COLUMNS).join(JobRow, JobRow.id == RunRow.job_id).where(RunRow.ended_at.is_(None)).order_by(RunRow.id)
)
_RUNS_OF = (
    select(*METER_COLUMNS)
    .join(JobRow, JobRow.id == RunRow.job_id)
    .where(
        RunRow.ended_at.is_(None),
        RunRow.job_id.in_(bindparam("jobs", expanding=True)),
        RunRow.attempt.in_(bindparam("attempts", expanding=True)),
    )
)
_RUNS_OF_LOCKED = _RUNS_OF.order_by(RunRow.job_id, RunRow.attempt).with_for_update(of=RunRow)
_FACT_COLUMNS = (
    JobRow.id,
    JobRow.state,
    JobRow.budget,
    JobRow.user,
    JobRow.kind,
    JobRow.grace,
    JobRow.attempt,
    JobRow.requeue,
    JobRow.cancel_requested_at,
    JobRow.spec,
    JobRow.gpus,
    JobRow.cpus,
    JobRow.memory_mib,
)
_JOB_FACTS = select(*_FACT_COLUMNS).where(JobRow.id.in_(bindparam("ids", expanding=True)))
_CANCELLED_PENDING = (
    select(*_FACT_COLUMNS)
    .where(JobRow.cancel_requested_at.is_not(None), JobRow.state == JobState.PENDING.value)
    .order_by(JobRow.id)
)
_USAGE_ROWS = select(BudgetUsageRow.budget, BudgetUsageRow.usage, BudgetUsageRow.as_of)
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
    """The port's Intent of an outbox row (decoded by allotment.changes.intents)."""
    return decode(row.id, row.kind, row.job_id, row.attempt, row.payload)
