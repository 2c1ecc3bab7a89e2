"""The change-set records, and the facts a store loads for the rules that build them.

Owns: ChangeSet and its parts (what a store must write), OpenRun and JobFacts (what it must read first), and the
settings the rules run under (Accounting, Rules).

Must not: carry rules (decisions.py, events.py and steps.py hold them) or know how rows are written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from allotment.core.decisions import Reserve
from allotment.core.jobstate import JobState
from allotment.core.model import Allocation, Micro, PolicyConfig, RunClass, Seconds
from allotment.ledger.charges import Meter
from allotment.ledger.entries import INFRASTRUCTURE, Entry, EntryKind
from allotment.ledger.periods import PeriodSpec, Rollover
from allotment.ports.executor import ArrayPosition, LaunchSpec


@dataclass(frozen=True, slots=True)
class Accounting:
    """How money and usage are kept: the period calendar, what a new period inherits, and how often open runs are
    charged (they are always charged when they end or change price)."""

    period: PeriodSpec
    rollover: Rollover = field(default_factory=Rollover)
    charge_every: Seconds = 300


@dataclass(frozen=True, slots=True)
class Rules:
    """What the change-set rules run under: the policy's settings, the GPU types' rates and the accounting."""

    policy: PolicyConfig
    rates: Mapping[str, Micro]
    accounting: Accounting


# -- facts a store loads ---------------------------------------------------------------------------------------
class OpenRun(NamedTuple):
    """An open run as the rules need it: its meter, its signal and its place in its job. A NamedTuple, not a frozen
    dataclass: a store builds one per open run every cycle, and a tuple is built without a setattr per field."""

    run_id: str
    job_id: str
    attempt: int
    budget: str
    started_at: Seconds
    run_class: RunClass
    rate: Micro
    price: int
    price_since: Seconds
    charged_until: Seconds
    signalled: bool = False
    preempt_reason: str | None = None
    requeue: bool | None = None
    confirmed: bool = False
    checkpoint_at: Seconds | None = None
    """When the job last reported a checkpoint in this run (rule `least-lost-work`)."""

    @property
    def meter(self) -> Meter:
        return Meter(self.run_id, self.job_id, self.budget, self.rate, self.price, self.price_since, self.charged_until)


@dataclass(frozen=True, slots=True)
class JobFacts:
    """A job as the rules need it to start, signal or end it."""

    job_id: str
    state: JobState
    budget: str
    user: str
    kind: str
    grace: Seconds
    attempt: int
    """The attempt its next run will have."""
    requeue: bool
    cancel_requested: bool
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    image: str | None = None
    gpus: int = 0
    """GPUs per replica."""
    cpus: int = 0
    """CPUs per replica (0: no request; decision 60)."""
    memory: int = 0
    """MiB of memory per replica (0: no request)."""
    array: ArrayPosition | None = None
    """The job array it is a task of, and its index there (its spec's `array`)."""


# -- what a store writes ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Transition:
    job_id: str
    from_state: JobState
    to_state: JobState
    at: Seconds
    why: str
    attempt: int | None = None
    """The job's next attempt, when this transition started a run."""


@dataclass(frozen=True, slots=True)
class RunOpened:
    run_id: str
    job_id: str
    attempt: int
    started_at: Seconds
    placement: tuple[Allocation, ...]
    run_class: RunClass
    slice_end: Seconds | None
    rate: Micro
    price: int
    backfill_for: str | None


@dataclass(frozen=True, slots=True)
class RunSignalled:
    run_id: str
    at: Seconds
    kill_at: Seconds
    reason: str
    preemptor: str | None
    requeue: bool


@dataclass(frozen=True, slots=True)
class RunEnded:
    run_id: str
    at: Seconds
    exit_code: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class RunTouched:
    """A run's small facts the executor reported or a renewal changed (None: unchanged)."""

    run_id: str
    confirmed_at: Seconds | None = None
    idle_since: Seconds | None = None
    clear_idle: bool = False
    slice_end: Seconds | None = None
    checkpoint_at: Seconds | None = None
    checkpoint_every: Seconds | None = None


@dataclass(frozen=True, slots=True)
class SliceGrant:
    run_id: str
    job_id: str
    start: Seconds
    end: Seconds
    kind: str
    """grant | renew"""


@dataclass(frozen=True, slots=True)
class LaunchIntent:
    run_id: str
    spec: LaunchSpec


@dataclass(frozen=True, slots=True)
class TerminateIntent:
    job_id: str
    attempt: int
    run_id: str
    grace: Seconds


IntentChange = LaunchIntent | TerminateIntent


@dataclass(frozen=True, slots=True)
class ReasonRow:
    """A pending reason to upsert (values as reason_values in steps.py builds them)."""

    job_id: str
    blocker: str
    message: str
    needed_gpus: int
    free_gpus: int
    estimated_start: Seconds | None
    hints: tuple[tuple[str, str, Seconds | None], ...]
    at: Seconds


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    budget: str
    usage: float
    as_of: Seconds
    new: bool = False


@dataclass(slots=True)
class ChangeSet:
    """Everything one step, cycle or event batch changes, in the order a store must write it: runs opened, then run
    changes and meters, job transitions, ledger entries, slices, intents (their order is delivery order), pending
    reasons, reservations, usage and engine keys. Built by the rules, extended with `+=`, then persisted once."""

    opened: list[RunOpened] = field(default_factory=list)
    signalled: list[RunSignalled] = field(default_factory=list)
    ended: list[RunEnded] = field(default_factory=list)
    touched: list[RunTouched] = field(default_factory=list)
    meters: dict[str, Meter] = field(default_factory=dict)
    """Run id → its meter after this change (price, price_since, charged_until), for runs that existed before."""
    reclassed: dict[str, RunClass] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    slices: list[SliceGrant] = field(default_factory=list)
    intents: list[IntentChange] = field(default_factory=list)
    reasons: list[ReasonRow] = field(default_factory=list)
    reasons_gone: list[str] = field(default_factory=list)
    reservations: tuple[Reserve, ...] | None = None
    """This cycle's reservations, replacing all others; None leaves them."""
    usage: list[UsageUpdate] = field(default_factory=list)
    state: dict[str, object] = field(default_factory=dict)
    """engine_state keys to set."""

    def __iadd__(self, other: ChangeSet) -> ChangeSet:
        self.opened += other.opened
        self.signalled += other.signalled
        self.ended += other.ended
        self.touched += other.touched
        self.meters.update(other.meters)
        self.reclassed.update(other.reclassed)
        self.transitions += other.transitions
        self.entries += other.entries
        self.slices += other.slices
        self.intents += other.intents
        self.reasons += other.reasons
        self.reasons_gone += other.reasons_gone
        if other.reservations is not None:
            self.reservations = other.reservations
        self.usage += other.usage
        self.state.update(other.state)
        return self

    @property
    def charged(self) -> Micro:
        """Credit-microunits charged to budgets (not the infrastructure account) by this change (positive)."""
        return -sum(e.amount for e in self.entries if e.kind is EntryKind.CHARGE and e.budget != INFRASTRUCTURE)

    def meter_of(self, run: OpenRun) -> Meter:
        """`run`'s meter after this change."""
        return self.meters.get(run.run_id) or run.meter
