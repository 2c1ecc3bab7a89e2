"""The Store port: what the engine needs from durable state, each call one transaction.

Owns: the SchedulingStore Protocol and the records crossing it (intents for the executor, a cycle's report).
Must not: implement storage (allotment.store does, on SQLite and PostgreSQL).

A cycle is atomic: `cycle()` loads the snapshot, calls the policy and applies its decisions — job transitions,
runs, slices, reservations, ledger entries, fair-share usage and the executor intents — in one transaction, so a
crash leaves either all of a cycle or none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from allotment.core.decisions import Decisions
from allotment.core.model import Seconds, Snapshot
from allotment.ports.executor import ExecutorEvent, LaunchSpec


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


class SchedulingStore(Protocol):
    def record_events(self, events: Sequence[ExecutorEvent], now: Seconds) -> int:
        """Apply what the executor reported (started, exited, lost); returns how many changed state."""
        ...

    def cycle(self, decide: Decide, now: Seconds) -> CycleReport:
        """One atomic scheduling cycle."""
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
