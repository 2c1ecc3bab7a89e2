"""The Store port: what the engine needs from durable state.

Owns: the SchedulingStore Protocol and the records crossing it (intents for the executor, a cycle's report).
Must not: implement storage (allotment.store does, on SQLite and PostgreSQL) or know what a change means.

The store is a unit of work: `with store.transaction(now) as tx:` is one transaction; the engine's steps read through
`tx` and write through `tx.persist(changes)` (the unit's Protocol, allotment.changes.unit.CycleUnit, lives with the
change sets it speaks, above this layer: SchedulingStore is generic in it). A cycle is one such transaction — period
rollover, usage decay, the snapshot, the policy's decisions and what they mean (job transitions, runs, slices,
reservations, ledger entries, pending reasons, the executor intents) — so a crash leaves all of a cycle or none.
The outbox calls (undelivered, mark_delivered) and reconciliation reads are their own short transactions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from allotment.core.decisions import Decisions
from allotment.core.model import Seconds, Snapshot
from allotment.ports.executor import LaunchSpec


class IntentKind(StrEnum):
    LAUNCH = "launch"
    TERMINATE = "terminate"


@dataclass(frozen=True, slots=True)
class Intent:
    """A command for the executor, recorded in the cycle's transaction and delivered after it commits."""

    id: int
    kind: IntentKind
    job_id: str
    attempt: int
    spec: LaunchSpec | None = None
    grace: int = 0


@dataclass(frozen=True, slots=True)
class CycleReport:
    now: Seconds
    decisions: Decisions
    intents: int
    charged: int
    """Credit-microunits posted as charges in this cycle."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds spent loading, deciding and applying."""


Decide = Callable[[Snapshot, Seconds], Decisions]


Unit_co = TypeVar("Unit_co", covariant=True)


class SchedulingStore(Protocol[Unit_co]):
    def transaction(self, now: Seconds, *, cycle: bool = False) -> AbstractContextManager[Unit_co]:
        """One transaction as a unit of work, committed when the block ends (rolled back if it raises). `cycle`:
        it is a scheduling cycle, not the recording of executor events."""
        ...

    def cycled(self, report: CycleReport) -> None:
        """Told after each committed cycle (observers count and time cycles)."""
        ...

    def undelivered(self) -> list[Intent]:
        """Intents recorded but not yet handed to the executor, oldest first."""
        ...

    def mark_delivered(self, ids: Sequence[int], at: Seconds) -> None: ...

    def open_runs(self) -> Mapping[str, int]:
        """job_id → attempt of every run the store believes holds GPUs (for reconciliation)."""
        ...

    def next_deadline(self, now: Seconds) -> Seconds | None:
        """The earliest future slice end or kill deadline: when a cycle must run even if nothing happens."""
        ...
