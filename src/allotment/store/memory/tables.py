"""The in-memory store's state: the same tables as the SQL schema, as Python structures, and its undo journal.

Owns: the records (a job, a run, a period, an intent, a ledger entry as posted) and MemoryState, which holds them
with the indices the engine's reads need (active jobs, open runs by job, entries by run, balances per period and
budget); and the Journal every write goes through, so that a transaction that raises is undone to the last commit.

Must not: know what a change means (allotment.changes does) or hold a rule: every write here is a plain put, and the
unit of work (unit.py) says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from allotment.changes.records import OpenRun
from allotment.changes.snapshot import OpenRunRow
from allotment.core.model import Allocation, Budget, CapacityWindow, Cluster, Job, Micro, Node, Reservation, Seconds
from allotment.ledger.entries import Entry
from allotment.ledger.periods import Period

_MISSING = object()


class Journal:
    """The undo log of the open transaction: each write records how to take it back. `rollback` undoes them newest
    first; `commit` forgets them. Outside a transaction writes are not recorded (seeding, set-up)."""

    __slots__ = ("_undo", "on_rollback", "open")

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self.open = False
        self.on_rollback: list[Callable[[], None]] = []
        """Called after each rollback (what was derived from the undone state is forgotten)."""

    def begin(self) -> None:
        if self.open:
            raise RuntimeError("the in-memory store does not nest transactions")
        self.open = True

    def commit(self) -> None:
        self._undo.clear()
        self.open = False

    def rollback(self) -> None:
        while self._undo:
            self._undo.pop()()
        self.open = False
        for hook in self.on_rollback:
            hook()

    def put(self, table: dict[Any, Any], key: object, value: object) -> None:
        if self.open:
            old = table.get(key, _MISSING)
            self._undo.append(lambda: table.pop(key, None) if old is _MISSING else table.__setitem__(key, old))
        table[key] = value

    def drop(self, table: dict[Any, Any], key: object) -> None:
        if key not in table:
            return
        if self.open:
            old = table[key]
            self._undo.append(lambda: table.__setitem__(key, old))
        del table[key]

    def append(self, rows: list[Any], value: object) -> None:
        if self.open:
            n = len(rows)
            self._undo.append(lambda: rows.__delitem__(slice(n, None)))
        rows.append(value)

    def set(self, record: object, name: str, value: object) -> None:
        if self.open:
            old = getattr(record, name)
            self._undo.append(lambda: setattr(record, name, old))
        setattr(record, name, value)


@dataclass(slots=True)
class JobRec:
    """A job: what it asked for (a core Job without a run) and its mutable state, as the jobs table's columns."""

    job: Job
    name: str
    kind: str
    spec: dict[str, Any]
    state: str
    state_reason: str
    updated_at: Seconds
    attempt: int = 0
    cancel_requested_at: Seconds | None = None
    request_id: str | None = None
    hold: str | None = None
    """The jobs table's `hold`: user, admin, or None (changes.eligibility)."""
    revision: int = 0
    """The jobs table's `revision`: how many updates changed what the job asks for (service.jobedit)."""
    requeue_attempt: int | None = None
    """The jobs table's `requeue_attempt`: the attempt a requeue was asked of, or None."""
    requeues: int = 0
    """The jobs table's `requeues`: how many requeues were asked."""
    array_id: str | None = None
    """The jobs table's array columns: the array this job is a task of, its index and the array's `%N`."""
    array_index: int | None = None
    array_limit: int | None = None
    dependency: str | None = None
    """The jobs table's `dependency`: canonical sbatch --dependency text, or None (changes.eligibility)."""


@dataclass(slots=True)
class RunRec:
    """A run, as the runs table's columns."""

    id: str
    job_id: str
    attempt: int
    started_at: Seconds
    placement: tuple[Allocation, ...]
    run_class: str
    slice_end: Seconds | None
    rate: Micro
    price: int
    price_since: Seconds
    charged_until: Seconds
    backfill_for: str | None = None
    signalled_at: Seconds | None = None
    kill_at: Seconds | None = None
    preempt_reason: str | None = None
    preemptor: str | None = None
    requeue: bool | None = None
    ended_at: Seconds | None = None
    exit_code: int | None = None
    end_reason: str | None = None
    confirmed_at: Seconds | None = None
    idle_since: Seconds | None = None
    checkpoint_at: Seconds | None = None
    checkpoint_every: Seconds | None = None
    views: tuple[OpenRun, OpenRunRow] | None = None
    """What the unit last built of this run for the engine's reads (its OpenRun and snapshot row), None once any
    column changed: unit.py clears it on every write to the run, and a rollback clears every run's."""


@dataclass(slots=True)
class PeriodRec:
    period: Period
    closed: bool = False


@dataclass(frozen=True, slots=True)
class IntentRec:
    """An outbox row: the intent as changes.intents encoded it."""

    id: int
    kind: str
    job_id: str
    attempt: int
    run_id: str
    payload: dict[str, Any]
    created_at: Seconds


@dataclass(frozen=True, slots=True)
class EventRec:
    """A job's history record."""

    job_id: str
    at: Seconds
    from_state: str | None
    to_state: str
    reason: str


@dataclass
class MemoryState:
    """Every table, and the indices kept with them. A write inside a transaction goes through `journal`."""

    journal: Journal = field(default_factory=Journal)
    clusters: dict[str, Cluster] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    node_reasons: dict[str, str | None] = field(default_factory=dict)
    budgets: dict[str, Budget] = field(default_factory=dict)
    windows: dict[str, CapacityWindow] = field(default_factory=dict)
    periods: dict[str, PeriodRec] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    """Every ledger entry, in posting order (the SQL table's id order)."""
    keys: dict[str, int] = field(default_factory=dict)
    """Idempotency key → position in `entries`."""
    by_run: dict[str, list[Entry]] = field(default_factory=dict)
    balances: dict[tuple[str, str], Micro] = field(default_factory=dict)
    """(period, budget) → the sum of its entries (the budget_balances table)."""
    jobs: dict[str, JobRec] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    """Client request id → job id."""
    active: dict[str, JobRec] = field(default_factory=dict)
    """The jobs in an active state (the index the snapshot reads)."""
    events: list[EventRec] = field(default_factory=list)
    runs: dict[str, RunRec] = field(default_factory=dict)
    open_runs: dict[str, RunRec] = field(default_factory=dict)
    """Run id → the runs not ended yet."""
    slices: list[tuple[str, str, Seconds, Seconds, str]] = field(default_factory=list)
    intents: dict[int, IntentRec] = field(default_factory=dict)
    undelivered: dict[int, IntentRec] = field(default_factory=dict)
    delivered_at: dict[int, Seconds] = field(default_factory=dict)
    next_intent: int = 1
    reasons: dict[str, object] = field(default_factory=dict)
    """Job id → its pending reason (a changes.records.ReasonRow)."""
    reservations: tuple[Reservation, ...] = ()
    usage: dict[str, tuple[float, Seconds]] = field(default_factory=dict)
    engine: dict[str, object] = field(default_factory=dict)
    """The engine's keys (engine_state)."""
