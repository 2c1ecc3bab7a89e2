"""The scheduling core's output vocabulary: what one decide() call asks the shell to do.

Owns: decision records (start, preempt, renew, lapse, reserve), the pending reason with numbers, drain estimates,
and the budget standings a cycle computed.

Must not: carry behaviour. The engine applies these records; the core never performs them.

The records are immutable dataclasses written as `@dataclass(init=False, slots=True, unsafe_hash=True)` with `Final`
fields and their own `__init__`, not as frozen dataclasses: compiled by mypyc (decision 40) a dataclass keeps its
generated `__init__` interpreted, and a frozen one sets each field through `object.__setattr__` (about 8,700
instructions per record; a cycle builds about 2,000). mypy rejects any assignment to a `Final` field and the compiled
core refuses it at run time; equality, hashing, `repr`, `fields()` and `replace()` are the dataclass's (decision 44).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from allotment.core.model import Allocation, Micro, Reservation, ReservationKind, RunClass, Seconds, rebuilt


class PreemptReason(StrEnum):
    FOR_SESSION = "for-session"  # a session needs the GPUs
    FOR_GUARANTEED = "for-guaranteed"  # opportunistic work yields to guaranteed work
    FAIR_SHARE = "fair-share"  # slice-expired work of an over-share budget yields to an under-share budget
    RESERVATION = "reservation"  # a planned start (large gang or starving budget) claims the GPUs
    WINDOW = "capacity-window"  # a capacity window's budget reclaims its pool
    HEADROOM = "headroom"  # session headroom is refilled
    DRAIN = "drain"  # the node is draining
    FORCED = "forced-drain"  # an administrator's forced action (owner refunded)
    NODE_DOWN = "node-down"  # the node was lost (owner refunded)
    IDLE_SESSION = "idle-session"  # a session idle past its limit is reclaimed
    SESSION_END = "session-end"  # a session reached the end of its length
    MAX_RUNTIME = "max-runtime"  # the job reached its maximum runtime
    PRIORITY = "priority"  # baseline policies only: higher-priority work takes the GPUs (policies/priority.py)
    CANCELLED = "cancelled"  # its owner cancelled it (core/cancellation.py); never requeued
    REQUEUED = "requeue-requested"  # its owner asked to requeue it (scontrol requeue, core/cancellation.py); requeued


REFUNDED_REASONS = frozenset({PreemptReason.FORCED, PreemptReason.NODE_DOWN})
"""Preemptions that are the fleet's fault: the owner is refunded and the infrastructure account pays."""

FINAL_REASONS = frozenset({PreemptReason.IDLE_SESSION, PreemptReason.SESSION_END, PreemptReason.MAX_RUNTIME})
"""Preemptions after which the job is finished, not requeued."""


@dataclass(init=False, slots=True, unsafe_hash=True)
class Start:
    job_id: Final[str]
    placement: Final[tuple[Allocation, ...]]
    run_class: Final[RunClass]
    slice_end: Final[Seconds | None]
    rule: Final[str]
    """The rule that started it, for the record (e.g. "fair-share", "session", "reservation", "backfill")."""
    backfill_for: Final[str | None]
    """Set when it was placed on GPUs claimed by another job's planned start: it gives way to that plan."""

    def __init__(
        self,
        job_id: str,
        placement: tuple[Allocation, ...],
        run_class: RunClass,
        slice_end: Seconds | None,
        rule: str,
        backfill_for: str | None = None,
    ) -> None:
        self.job_id = job_id
        self.placement = placement
        self.run_class = run_class
        self.slice_end = slice_end
        self.rule = rule
        self.backfill_for = backfill_for

    def __reduce__(self) -> tuple[type[Start], tuple[object, ...]]:
        return rebuilt(self)


@dataclass(init=False, slots=True, unsafe_hash=True)
class Preempt:
    job_id: Final[str]
    reason: Final[PreemptReason]
    grace: Final[Seconds]
    requeue: Final[bool]
    preemptor: Final[str | None]

    def __init__(
        self, job_id: str, reason: PreemptReason, grace: Seconds, requeue: bool, preemptor: str | None = None
    ) -> None:
        self.job_id = job_id
        self.reason = reason
        self.grace = grace
        self.requeue = requeue
        self.preemptor = preemptor

    def __reduce__(self) -> tuple[type[Preempt], tuple[object, ...]]:
        return rebuilt(self)

    @property
    def refund(self) -> bool:
        return self.reason in REFUNDED_REASONS


@dataclass(init=False, slots=True, unsafe_hash=True)
class Renew:
    job_id: Final[str]
    slice_end: Final[Seconds]

    def __init__(self, job_id: str, slice_end: Seconds) -> None:
        self.job_id = job_id
        self.slice_end = slice_end

    def __reduce__(self) -> tuple[type[Renew], tuple[object, ...]]:
        return rebuilt(self)


@dataclass(init=False, slots=True, unsafe_hash=True)
class Lapse:
    """A run slice ended without renewal: the job runs on as opportunistic (preemptible, discounted)."""

    job_id: Final[str]
    why: Final[str]

    def __init__(self, job_id: str, why: str) -> None:
        self.job_id = job_id
        self.why = why

    def __reduce__(self) -> tuple[type[Lapse], tuple[object, ...]]:
        return rebuilt(self)


@dataclass(init=False, slots=True, unsafe_hash=True)
class Reserve:
    job_id: Final[str]
    nodes: Final[tuple[tuple[str, int], ...]]
    planned_start: Final[Seconds]
    kind: Final[ReservationKind]
    since: Final[Seconds]
    """When the reservation was first made (kept across cycles)."""
    gave_way: Final[tuple[str, ...]]
    """Running jobs on its nodes that gave way to it when it was made (core.model.Reservation.gave_way)."""

    def __init__(
        self,
        job_id: str,
        nodes: tuple[tuple[str, int], ...],
        planned_start: Seconds,
        kind: ReservationKind,
        since: Seconds,
        gave_way: tuple[str, ...] = (),
    ) -> None:
        self.job_id = job_id
        self.nodes = nodes
        self.planned_start = planned_start
        self.kind = kind
        self.since = since
        self.gave_way = gave_way

    def __reduce__(self) -> tuple[type[Reserve], tuple[object, ...]]:
        return rebuilt(self)

    def carried(self) -> Reservation:
        """The reservation as the next cycle's snapshot holds it."""
        return Reservation(self.job_id, self.nodes, self.planned_start, self.kind, self.since, self.gave_way)


class Blocker(StrEnum):
    CAPACITY = "capacity"  # not enough free GPUs in the allowed pools
    RESERVED = "reserved"  # free GPUs are promised to a planned start
    HEADROOM = "headroom"  # the only free GPUs are session headroom
    WINDOW = "capacity-window"  # the pool is booked by another budget's capacity window
    FUNDS = "funds"  # the budget cannot pay for the requested slice
    LIMIT = "limit"  # a budget's GPU limit
    SESSION_LIMIT = "session-limit"  # the user's session count, or the session is outside the session limits
    NO_POOL = "no-pool"  # no ready node of an allowed type and cluster can ever hold it
    WAITING_FOR_GRACE = "waiting-for-grace"  # GPUs are being freed for it; victims are in their grace period
    HELD = "held"  # held by its owner or an administrator: the scheduler does not consider it (changes/eligibility)
    ARRAY_LIMIT = "array-limit"  # its job array already runs its `%N` tasks at once (changes/eligibility)
    DEPENDENCY = "dependency"  # its dependency (sbatch --dependency) is not satisfied yet (changes/eligibility)


class HintKind(StrEnum):
    FEWER_GPUS = "fewer-gpus"
    SHORTER_SLICE = "shorter-slice"
    OTHER_POOL = "other-pool"
    OPPORTUNISTIC = "opportunistic"


@dataclass(init=False, slots=True, unsafe_hash=True)
class Hint:
    """One change that would make the job start sooner, and when it would then start."""

    kind: Final[HintKind]
    detail: Final[str]
    start: Final[Seconds | None]

    def __init__(self, kind: HintKind, detail: str, start: Seconds | None) -> None:
        self.kind = kind
        self.detail = detail
        self.start = start

    def __reduce__(self) -> tuple[type[Hint], tuple[object, ...]]:
        return rebuilt(self)


@dataclass(init=False, slots=True, unsafe_hash=True)
class Standing:
    """A budget's fair-share standing as this cycle computed it (before its own placements)."""

    balance: Final[Micro]
    committed: Final[Micro]
    """Cost of the remaining time of its jobs' granted slices (already promised money)."""
    entitled: Final[float]
    """Entitled fraction of the fleet, from allocations of active budgets along the tree."""
    used: Final[float]
    """Fraction of (decayed past + current) usage among active budgets."""

    def __init__(self, balance: Micro, committed: Micro, entitled: float, used: float) -> None:
        self.balance = balance
        self.committed = committed
        self.entitled = entitled
        self.used = used

    def __reduce__(self) -> tuple[type[Standing], tuple[object, ...]]:
        return rebuilt(self)

    @property
    def available(self) -> Micro:
        return self.balance - self.committed

    @property
    def ratio(self) -> float:
        """used / entitled: below 1.0 is below fair share."""
        if self.entitled <= 0:
            return float("inf") if self.used > 0 else 1.0
        return self.used / self.entitled


@dataclass(init=False, slots=True, unsafe_hash=True)
class WaitReason:
    blocker: Final[Blocker]
    message: Final[str]
    needed_gpus: Final[int]
    free_gpus: Final[int]
    """Free GPUs in the job's allowed pools that it may use."""
    estimated_start: Final[Seconds | None]
    hints: Final[tuple[Hint, ...]]

    def __init__(
        self,
        blocker: Blocker,
        message: str,
        needed_gpus: int,
        free_gpus: int,
        estimated_start: Seconds | None,
        hints: tuple[Hint, ...] = (),
    ) -> None:
        self.blocker = blocker
        self.message = message
        self.needed_gpus = needed_gpus
        self.free_gpus = free_gpus
        self.estimated_start = estimated_start
        self.hints = hints

    def __reduce__(self) -> tuple[type[WaitReason], tuple[object, ...]]:
        return rebuilt(self)


@dataclass(frozen=True, slots=True)
class Decisions:
    starts: tuple[Start, ...] = ()
    preempts: tuple[Preempt, ...] = ()
    renews: tuple[Renew, ...] = ()
    lapses: tuple[Lapse, ...] = ()
    reserves: tuple[Reserve, ...] = ()
    pending: Mapping[str, WaitReason] = field(default_factory=dict)
    drain_estimates: Mapping[str, Seconds] = field(default_factory=dict)
    """Draining node → when it will be empty."""
    standings: Mapping[str, Standing] = field(default_factory=dict)
    wake_at: Seconds | None = None
    """The next instant a decision is due even if nothing else happens: work a planned start counts on is told to
    leave only once its notice would end at the planned start (rule `planned-start`), so the caller decides again
    then — a cycle that came later would make the plan late. None when nothing is due."""
