"""A test rig for the engine: a real store (SQLite or PostgreSQL), the small example organisation, the simulated
executor (our own test double of the Executor port) and a manual clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from allotment.config import load_config, to_core
from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import ContractClass, JobKind, PolicyConfig
from allotment.core.units import cost
from allotment.engine.cycle import Engine as AllotEngine
from allotment.engine.setup import period_spec, seed
from allotment.executors.simulated import Outcome, SimulatedExecutor
from allotment.ledger.entries import EntryKind
from allotment.ledger.periods import Rollover
from allotment.ports.executor import ExecutorEvent, LaunchSpec
from allotment.store.db import session_factory
from allotment.store.jobs import Submission, request_cancel, submit
from allotment.store.scheduling import Accounting, SqlSchedulingStore
from allotment.store.tables import JobEventRow, JobRow, LedgerEntryRow, RunRow

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
T0 = 1_793_491_200  # 2026-11-01T00:00:00Z, the small example's first period


@dataclass
class FailingPolls:
    """The simulated executor (our test double of the Executor port), failing its first `failures` polls with the
    error `fail` makes; `calls` counts the polls asked for."""

    inner: SimulatedExecutor
    failures: int
    fail: Callable[[], Exception]
    calls: list[str] = field(default_factory=list)

    def poll(self) -> list[ExecutorEvent]:
        self.calls.append("poll")
        if self.failures > 0:
            self.failures -= 1
            raise self.fail()
        return self.inner.poll()

    def launch(self, spec: LaunchSpec) -> None:
        self.inner.launch(spec)

    def terminate(self, job_id: str, attempt: int, grace: int) -> None:
        self.inner.terminate(job_id, attempt, grace)

    def alive(self) -> Mapping[str, int]:
        return self.inner.alive()


class ManualClock:
    def __init__(self, now: int) -> None:
        self.t = now

    def now(self) -> int:
        return self.t

    def wait(self, seconds: float) -> None:
        self.t += int(seconds)


@dataclass
class Rig:
    db: Engine
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    policy_changes: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cfg = load_config(SMALL)
        core = to_core(self.cfg)
        self.policy: PolicyConfig = replace(core.policy, default_headroom=0, **self.policy_changes)  # type: ignore[arg-type]
        self.sessions: sessionmaker[Session] = session_factory(self.db)
        self.clock = ManualClock(T0 + 3600)
        seed(self.sessions, self.cfg, self.clock.now())
        self.store = SqlSchedulingStore(
            self.sessions, self.policy, core.rates, Accounting(period_spec(self.cfg), Rollover(), charge_every=300)
        )
        self.executor = SimulatedExecutor(self._outcome, now=self.clock.now(), clock=self.clock.now)
        self.engine = AllotEngine(self.store, self.executor, self.clock, AllotmentPolicy())
        self.rates = core.rates

    def _outcome(self, spec: LaunchSpec) -> Outcome:
        return self.outcomes.get(spec.job_id, Outcome(duration=None))

    # -- acting ------------------------------------------------------------------------------------------------
    def submit(
        self,
        job_id: str,
        budget: str = "pretrain",
        user: str = "ben",
        gpus: int = 8,
        *,
        outcome: Outcome | None = None,
        **kw: Any,
    ) -> str:
        if outcome is not None:
            self.outcomes[job_id] = outcome
        with self.sessions.begin() as s:
            submit(
                s,
                Submission(budget=budget, user=user, command=["train", job_id], gpus=gpus, job_id=job_id, **kw),
                self.clock.now(),
            )
        return job_id

    def cancel(self, job_id: str) -> None:
        with self.sessions.begin() as s:
            request_cancel(s, job_id, self.clock.now())

    def step(self, to: int | None = None) -> None:
        if to is not None:
            self.clock.t = to
        self.engine.step()

    # -- reading -----------------------------------------------------------------------------------------------
    def state(self, job_id: str) -> str:
        with self.sessions() as s:
            job = s.get(JobRow, job_id)
            assert job is not None
            return job.state

    def runs(self, job_id: str) -> list[RunRow]:
        with self.sessions() as s:
            return list(s.scalars(select(RunRow).where(RunRow.job_id == job_id).order_by(RunRow.attempt)))

    def history(self, job_id: str) -> list[tuple[str | None, str]]:
        with self.sessions() as s:
            return [
                (e.from_state, e.to_state)
                for e in s.scalars(select(JobEventRow).where(JobEventRow.job_id == job_id).order_by(JobEventRow.id))
            ]

    def charged(self, budget: str) -> int:
        with self.sessions() as s:
            total = s.scalar(
                select(func.coalesce(func.sum(LedgerEntryRow.amount_micro), 0)).where(
                    LedgerEntryRow.budget == budget,
                    LedgerEntryRow.kind.in_([EntryKind.CHARGE.value, EntryKind.REFUND.value]),
                )
            )
            return -int(total or 0)

    def held_cost(self, job_id: str) -> int:
        """The exact cost of every ended run of the job, from the runs' own records."""
        total = 0
        for r in self.runs(job_id):
            assert r.ended_at is not None
            total += cost(1, r.rate_micro, r.price, r.ended_at - r.started_at)
        return total


JOB_KINDS = (JobKind.BATCH, JobKind.SESSION)
CONTRACTS = (ContractClass.GUARANTEED, ContractClass.OPPORTUNISTIC)
