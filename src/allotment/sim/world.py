"""What a simulation writes and reads outside the engine cycle, on either store: the World port and its two sides.

Owns: the World Protocol — submissions (as the API's group commit makes them), the operator's node states (a fault
drains or downs a ready node, a repair readies it), which nodes open runs hold, how many jobs are active, and reading
back what happened (runs, job states, ledger entries) — and its implementations on the SQL store (SqlWorld, the
server's own tables) and on the in-memory store (MemoryWorld); `assemble` builds the engine and world a simulation
runs on, for `store="memory"` (the default) or `store="sqlite"` (any SQLAlchemy URL).

Must not: decide, apply decisions or compute metrics; neither side holds a rule (the stores share allotment.changes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from allotment.changes.records import Accounting
from allotment.config import AllotmentConfig, load_config, to_core
from allotment.core.jobstate import ACTIVE_ORDERED
from allotment.core.model import NodeState, Seconds
from allotment.core.policy import Policy
from allotment.engine.cycle import Engine
from allotment.engine.setup import Settings, build, period_spec
from allotment.ledger.periods import Rollover
from allotment.ports.clock import Clock
from allotment.ports.executor import Executor
from allotment.store.jobs import Submission, submit_many
from allotment.store.memory import MemorySchedulingStore
from allotment.store.tables import JobRow, LedgerEntryRow, NodeRow, RunRow


@dataclass(frozen=True, slots=True)
class RunRead:
    """A run as read back: its job, attempt, times, placement and why it ended early."""

    job_id: str
    attempt: int
    started_at: Seconds
    ended_at: Seconds | None
    placement: tuple[tuple[str, int], ...]
    """(node, GPUs) per allocation."""
    run_class: str
    preempt_reason: str | None


@dataclass(frozen=True, slots=True)
class LedgerLine:
    budget: str
    period_id: str
    kind: str
    amount: int
    at: Seconds


@dataclass(frozen=True, slots=True)
class ReadBack:
    runs: tuple[RunRead, ...]
    """In (start, job, attempt) order."""
    states: dict[str, str]
    entries: tuple[LedgerLine, ...]
    """In posting order."""


class World(Protocol):
    def submit(self, subs: Sequence[Submission], now: Seconds) -> None: ...

    def node_names(self) -> list[str]: ...

    def fault(self, node: str, state: NodeState, at: Seconds) -> bool:
        """Mark a ready node `state` (draining or down) for a simulated hardware fault; False when it is not ready."""
        ...

    def repair(self, node: str, at: Seconds) -> None: ...

    def held_nodes(self) -> set[str]:
        """The nodes some open run holds."""
        ...

    def active(self) -> int:
        """How many jobs are in an active state."""
        ...

    def read_back(self) -> ReadBack: ...

    def close(self) -> None:
        """Release what the store holds open (a database's connections), so nothing changes its files later."""
        ...


_FAULT = "simulated hardware fault"


class SqlWorld:
    def __init__(self, sessions: sessionmaker[Session], close: Callable[[], None]) -> None:
        self.sessions = sessions
        self._close = close

    def submit(self, subs: Sequence[Submission], now: Seconds) -> None:
        with self.sessions.begin() as session:
            submit_many(session, subs, now)  # one INSERT per table for an instant's arrivals (the API's group commit)

    def node_names(self) -> list[str]:
        with self.sessions() as session:
            return sorted(session.scalars(select(NodeRow.name)))

    def fault(self, node: str, state: NodeState, at: Seconds) -> bool:
        with self.sessions.begin() as session:
            row = session.get(NodeRow, node)
            if row is None or row.state != NodeState.READY.value:
                return False
            row.state, row.reason, row.updated_at = state.value, _FAULT, at
        return True

    def repair(self, node: str, at: Seconds) -> None:
        with self.sessions.begin() as session:
            ready = NodeState.READY.value
            session.execute(update(NodeRow).where(NodeRow.name == node).values(state=ready, reason=None, updated_at=at))

    def held_nodes(self) -> set[str]:
        with self.sessions() as session:
            placements = session.scalars(select(RunRow.placement).where(RunRow.ended_at.is_(None)))
            return {a["node"] for p in placements for a in p}

    def active(self) -> int:
        with self.sessions() as session:
            stmt = select(func.count()).select_from(JobRow).where(JobRow.state.in_(ACTIVE_ORDERED))
            return int(session.scalar(stmt) or 0)

    def read_back(self) -> ReadBack:
        with self.sessions() as session:
            runs = tuple(
                RunRead(
                    r.job_id,
                    r.attempt,
                    r.started_at,
                    r.ended_at,
                    tuple((a["node"], len(a["gpus"])) for a in r.placement),
                    r.run_class,
                    r.preempt_reason,
                )
                for r in session.scalars(select(RunRow).order_by(RunRow.started_at, RunRow.job_id, RunRow.attempt))
            )
            states = {str(k): str(v) for k, v in session.execute(select(JobRow.id, JobRow.state)).all()}
            entries = tuple(
                LedgerLine(b, p, k, int(a), int(t))
                for b, p, k, a, t in session.execute(
                    select(
                        LedgerEntryRow.budget,
                        LedgerEntryRow.period_id,
                        LedgerEntryRow.kind,
                        LedgerEntryRow.amount_micro,
                        LedgerEntryRow.at,
                    ).order_by(LedgerEntryRow.id)
                )
            )
        return ReadBack(runs, states, entries)

    def close(self) -> None:
        self._close()


class MemoryWorld:
    def __init__(self, store: MemorySchedulingStore) -> None:
        self.store = store
        self.s = store.state

    def submit(self, subs: Sequence[Submission], now: Seconds) -> None:
        self.store.submit(subs, now)

    def node_names(self) -> list[str]:
        return sorted(self.s.nodes)

    def fault(self, node: str, state: NodeState, at: Seconds) -> bool:
        found = self.s.nodes.get(node)
        if found is None or found.state is not NodeState.READY:
            return False
        self.store.set_node(node, state, _FAULT)
        return True

    def repair(self, node: str, at: Seconds) -> None:
        self.store.set_node(node, NodeState.READY, None)

    def held_nodes(self) -> set[str]:
        return {a.node for r in self.s.open_runs.values() for a in r.placement}

    def active(self) -> int:
        return len(self.s.active)

    def read_back(self) -> ReadBack:
        s = self.s
        runs = tuple(
            RunRead(
                r.job_id,
                r.attempt,
                r.started_at,
                r.ended_at,
                tuple((a.node, len(a.gpus)) for a in r.placement),
                r.run_class,
                r.preempt_reason,
            )
            for r in sorted(s.runs.values(), key=lambda r: (r.started_at, r.job_id, r.attempt))
        )
        states = {jid: rec.state for jid, rec in s.jobs.items()}
        entries = tuple(LedgerLine(e.budget, e.period_id, e.kind.value, e.amount, e.at) for e in s.entries)
        return ReadBack(runs, states, entries)

    def close(self) -> None:
        """Nothing is held open: the tables are this process's memory."""


STORES = ("memory", "sqlite")


@dataclass
class Assembled:
    engine: Engine
    world: World
    config: AllotmentConfig


def assemble(
    store: str, config: Path, database_url: str, charge_every: Seconds, executor: Executor, policy: Policy, clock: Clock
) -> Assembled:
    """The engine and world a simulation runs on. "memory": the in-memory store seeded from `config` as the server
    seeds its database; "sqlite": the server's own wiring (engine.setup.build) on `database_url`."""
    if store == "sqlite":
        settings = Settings(config=config, data_dir=Path("."), database_url=database_url, charge_every=charge_every)
        built = build(settings, executor=executor, policy=policy, clock=clock)
        return Assembled(built.engine, SqlWorld(built.sessions, built.close), built.config)
    if store != "memory":
        raise ValueError(f"unknown store {store!r} (choose: {', '.join(STORES)})")
    cfg = load_config(config)
    core = to_core(cfg)
    accounting = Accounting(period_spec(cfg), Rollover(carry_credit=cfg.period.carry_over), charge_every)
    mem = MemorySchedulingStore(core.policy, core.rates, accounting)
    mem.seed(clusters=core.clusters, nodes=core.nodes, budgets=core.budgets, windows=core.windows)
    return Assembled(Engine(mem, executor, clock, policy), MemoryWorld(mem), cfg)
