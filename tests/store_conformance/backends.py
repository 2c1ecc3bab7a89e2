"""The stores the conformance suite runs against, behind one small harness: the in-memory store, SQLite and
PostgreSQL, each seeded with the small example organisation, with what the API and the operator write outside the
engine (submissions, cancellations) done the way each store offers it.

A Backend is not a double of anything: `store` is the real SchedulingStore under test; only seeding and the writes
the API makes differ, because the in-memory store has no SQL session to make them in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from allotment.changes.records import Accounting
from allotment.changes.unit import CycleUnit
from allotment.config import load_config, to_core
from allotment.core.model import PolicyConfig, Snapshot
from allotment.engine.setup import period_spec, seed
from allotment.ledger.periods import Rollover
from allotment.ports.store import SchedulingStore
from allotment.store.db import make_engine, session_factory
from allotment.store.jobs import Submission, request_cancel, submit_many
from allotment.store.memory import MemorySchedulingStore
from allotment.store.migrate import upgrade
from allotment.store.scheduling import SqlSchedulingStore
from tests.databases import postgres_engine

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
T0 = 1_793_491_200  # 2026-11-01T00:00:00Z, the small example's first period
CHARGE_EVERY = 300


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def store(self) -> SchedulingStore[CycleUnit]: ...

    def submit(self, *subs: Submission, now: int) -> None: ...

    def cancel(self, job_id: str, now: int) -> None: ...


def _org() -> tuple[Any, PolicyConfig, Accounting]:
    cfg = load_config(SMALL)
    core = to_core(cfg)
    policy = replace(core.policy, default_headroom=0)
    return cfg, policy, Accounting(period_spec(cfg), Rollover(), charge_every=CHARGE_EVERY)


@dataclass
class MemoryBackend:
    name: str
    store: MemorySchedulingStore
    policy: PolicyConfig

    @classmethod
    def make(cls) -> MemoryBackend:
        cfg, policy, accounting = _org()
        core = to_core(cfg)
        store = MemorySchedulingStore(policy, core.rates, accounting)
        store.seed(clusters=core.clusters, nodes=core.nodes, budgets=core.budgets, windows=core.windows)
        return cls("memory", store, policy)

    def submit(self, *subs: Submission, now: int) -> None:
        self.store.submit(subs, now)

    def cancel(self, job_id: str, now: int) -> None:
        self.store.request_cancel(job_id, now)


@dataclass
class SqlBackend:
    name: str
    store: SqlSchedulingStore
    policy: PolicyConfig
    sessions: sessionmaker[Session]

    @classmethod
    def make(cls, name: str, engine: Engine) -> SqlBackend:
        upgrade(engine)
        sessions = session_factory(engine)
        cfg, policy, accounting = _org()
        seed(sessions, cfg, T0)
        store = SqlSchedulingStore(sessions, policy, to_core(cfg).rates, accounting)
        return cls(name, store, policy, sessions)

    def submit(self, *subs: Submission, now: int) -> None:
        with self.sessions.begin() as s:
            submit_many(s, subs, now)

    def cancel(self, job_id: str, now: int) -> None:
        with self.sessions.begin() as s:
            request_cancel(s, job_id, now)


def backend(kind: str, tmp: Path) -> Iterator[Backend]:
    if kind == "memory":
        yield MemoryBackend.make()
        return
    if kind == "sqlite":
        engine = make_engine(f"sqlite:///{tmp / 'allotment.db'}")
        try:
            yield SqlBackend.make("sqlite", engine)
        finally:
            engine.dispose()
        return
    for engine in postgres_engine():
        yield SqlBackend.make("postgresql", engine)


def job(job_id: str, budget: str = "pretrain", gpus: int = 8, **kw: Any) -> Submission:
    """A submission of the small organisation (ben in pretrain by default)."""
    user = kw.pop("user", "ben")
    return Submission(budget=budget, user=user, command=["train", job_id], gpus=gpus, job_id=job_id, **kw)


def snapshot(b: Backend, now: int) -> Snapshot:
    """The snapshot the store loads at `now` (read only: the transaction persists nothing)."""
    with b.store.transaction(now) as tx:
        period = tx.state("period")
        return tx.snapshot(str(period))
