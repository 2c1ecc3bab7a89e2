"""The scheduling core's input vocabulary: plain, immutable data.

Owns: the types a snapshot is made of (fleet, budgets and their accounts, jobs and their runs, capacity windows,
reservations, policy settings) and small derived properties of them; and `rebuilt`, the pickle recipe for records
whose immutability comes from `Final` fields rather than `frozen=True` (Allocation here and the decision records,
decision 44: mypy rejects assigning to them and the compiled core refuses it at run time).

Must not: read a clock, touch disks, processes or the network, or draw random numbers. Times are integer seconds on
one axis chosen by the shell (the engine uses Unix time; the simulator its own clock). Money is integer
credit-microunits (one credit = one GPU-hour of the reference GPU type = 1_000_000 micro); prices are per-mille
integers (1000 = full price).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def _restore(record: object, state: Sequence[object]) -> None:
    """Set a slotted dataclass's fields from a pickled state; the fields missing from it take their defaults."""
    for f, value in zip(fields(record), state, strict=False):  # type: ignore[arg-type]
        object.__setattr__(record, f.name, value)
    for f in fields(record)[len(state) :]:  # type: ignore[arg-type]
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        object.__setattr__(record, f.name, default)


Seconds = int
"""A point in time or a duration, in whole seconds."""

Micro = int
"""Credit-microunits. One credit is one GPU-hour of the reference GPU type."""

MICRO_PER_CREDIT = 1_000_000
FULL_PRICE = 1000
"""Prices are per-mille multipliers: 1000 is full price, 400 is a 60 % discount."""


class NodeState(StrEnum):
    READY = "ready"
    CORDONED = "cordoned"  # nothing new lands; running work stays and may renew
    DRAINING = "draining"  # nothing new lands; opportunistic work leaves now, contracted work at slice end
    DOWN = "down"  # the node is lost; its work is gone and refunded


class JobKind(StrEnum):
    BATCH = "batch"
    SESSION = "session"


class ContractClass(StrEnum):
    GUARANTEED = "guaranteed"
    OPPORTUNISTIC = "opportunistic"


class RunClass(StrEnum):
    """What a running job is charged and protected as right now."""

    GUARANTEED = "guaranteed"  # holds (or held) a funded run slice
    SESSION = "session"  # an interactive session inside the session limits
    OPPORTUNISTIC = "opportunistic"  # preemptible at any time; charged at the opportunistic price


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    topology: tuple[str, ...] = ()
    """Topology label keys from the tightest level to the loosest, e.g. ("rack", "block")."""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cluster: str
    gpu_type: str
    gpus: int
    labels: tuple[tuple[str, str], ...] = ()
    state: NodeState = NodeState.READY
    forced: bool = False
    """A forced drain: every job leaves now, with the owner refunded (an administrator's explicit action)."""
    cpus: int = 0
    """CPUs the node offers to jobs; 0: not declared, CPU requests are not counted here (decision 60)."""
    memory: int = 0
    """MiB of memory the node offers to jobs; 0: not declared, memory requests are not counted here.
    Added last, with defaults, so snapshots pickled before them still load (Node.__setstate__)."""

    def __setstate__(self, state: Sequence[object]) -> None:
        """pickle's restore (see Job.__setstate__): fields added after a node was pickled take their defaults."""
        _restore(self, state)

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None

    @property
    def accepts_work(self) -> bool:
        return self.state is NodeState.READY


@dataclass(frozen=True, slots=True)
class Budget:
    """A node of the organisation tree. Leaf budgets pay for jobs."""

    name: str
    parent: str | None
    allocation: Micro
    """Credits allocated for the current period."""
    max_gpus: int | None = None
    """Optional limit on GPUs held at once by this budget's whole subtree."""


@dataclass(frozen=True, slots=True)
class Account:
    """A leaf budget's standing as the shell read it from the ledger."""

    balance: Micro
    """Credits left in the current period (allocation − charges + refunds ± adjustments). May be negative
    only through opportunistic charges."""
    usage: float = 0.0
    """Decayed past usage in credits (exponential decay with the policy's half-life), as of `now`."""


_Record = TypeVar("_Record", bound="DataclassInstance")


def rebuilt(record: _Record) -> tuple[type[_Record], tuple[object, ...]]:
    """pickle's recipe for a record written with `init=False` and `Final` fields (decision 44): call its class with
    its fields again. The compiled core needs it: a mypyc class cannot be made without running its `__init__`."""
    return type(record), tuple(getattr(record, f.name) for f in fields(record))


@dataclass(init=False, slots=True, unsafe_hash=True)
class Allocation:
    """GPUs a job holds (or will hold) on one node. Written like the decision records (core/decisions.py): every
    start builds one, so its `__init__` is compiled, not the dataclass's interpreted one (decision 44)."""

    node: Final[str]
    gpus: Final[tuple[int, ...]]

    def __init__(self, node: str, gpus: tuple[int, ...]) -> None:
        self.node = node
        self.gpus = gpus

    def __reduce__(self) -> tuple[type[Allocation], tuple[object, ...]]:
        return rebuilt(self)


@dataclass(frozen=True, slots=True)
class Preemption:
    """A running job that has been told to leave: SIGTERM at `signalled_at`, SIGKILL at `kill_at`."""

    signalled_at: Seconds
    kill_at: Seconds
    reason: str
    preemptor: str | None = None


@dataclass(frozen=True, slots=True)
class Run:
    """The current run of a job that holds GPUs."""

    placement: tuple[Allocation, ...]
    started_at: Seconds
    run_class: RunClass
    slice_end: Seconds | None = None
    """End of the granted run slice; None when the run never had one (opportunistic work). After its slice lapses
    a guaranteed run keeps the past end (it is then slice-expired work, priced as opportunistic)."""
    preemption: Preemption | None = None
    idle_since: Seconds | None = None
    """Sessions: when the last client detached (None while someone is attached)."""
    backfill_for: str | None = None
    """The job whose planned start this run was placed around (backfill): it gives way to that plan."""
    checkpoint_at: Seconds | None = None
    """When the job last reported a saved checkpoint in this run (None: never): what a preemption now would lose
    is the work since then (rule `least-lost-work`)."""
    checkpoint_every: Seconds | None = None
    """The seconds between its last two reports (the first one: since the run started), the rhythm a planned start
    may wait on; None until it reported one."""

    @property
    def gpu_count(self) -> int:
        return sum(len(a.gpus) for a in self.placement)

    def in_slice(self, now: Seconds) -> bool:
        return self.slice_end is not None and now < self.slice_end

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(a.node for a in self.placement)


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    budget: str
    user: str
    gpus: int
    """GPUs per replica."""
    replicas: int = 1
    kind: JobKind = JobKind.BATCH
    contract: ContractClass = ContractClass.GUARANTEED
    slice_seconds: Seconds = 3600
    """Requested run slice (guaranteed jobs); for sessions the requested session length."""
    priority: int = 0
    """Orders this job among its own budget's jobs only."""
    grace: Seconds = 60
    max_runtime: Seconds | None = None
    submitted_at: Seconds = 0
    gpu_types: tuple[str, ...] = ()
    """Allowed GPU types; empty means any."""
    clusters: tuple[str, ...] = ()
    """Allowed clusters; empty means any."""
    fallback_opportunistic: bool = False
    """A guaranteed job that accepts running opportunistically while its budget cannot fund a slice."""
    requeue: bool = True
    """Requeue automatically after a preemption."""
    run: Run | None = None
    cancel_requested: bool = False
    """Its owner asked to cancel it: a running job is told to leave (core/cancellation.py), a pending one ends.
    Last, with a default, so snapshots pickled before it existed still load (Job.__setstate__)."""
    cpus: int = 0
    """CPUs per replica; 0: no request (placement counts none, decision 60)."""
    memory: int = 0
    """MiB of memory per replica; 0: no request."""
    requeue_requested: bool = False
    """Someone who may manage it asked to requeue its current run (scontrol requeue): the running job is told to leave
    and goes back to the queue (core/cancellation.py). Only a running job carries it."""

    def __setstate__(self, state: Sequence[object]) -> None:
        """pickle's restore of the dataclass's state (its fields' values in order, a list): the fields added after a
        snapshot was pickled take their defaults."""
        _restore(self, state)

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.replicas

    @property
    def pending(self) -> bool:
        return self.run is None


@dataclass(frozen=True, slots=True)
class CapacityWindow:
    """A budget's right to `gpus` GPUs of the pool (cluster, gpu_type) during [start, end)."""

    id: str
    budget: str
    cluster: str
    gpu_type: str
    gpus: int
    start: Seconds
    end: Seconds

    def active(self, now: Seconds) -> bool:
        return self.start <= now < self.end


class ReservationKind(StrEnum):
    PLANNED = "planned"  # a budget's first pending job: start planned from known slice ends
    PREEMPTION = "preemption"  # GPUs being freed by preemption for this job


@dataclass(frozen=True, slots=True)
class Reservation:
    """GPUs promised to a pending job from `planned_start` on. Carried between cycles so plans stay stable."""

    job_id: str
    nodes: tuple[tuple[str, int], ...]
    """(node, GPU count) pairs."""
    planned_start: Seconds
    kind: ReservationKind
    since: Seconds = 0
    """When the reservation was first made: work started after it was placed under its plan."""
    gave_way: tuple[str, ...] = ()
    """Running jobs on its nodes that gave way to it when it was made: they stay counted as leaving for it however
    the fair-share standings move afterwards (a plan is a promise made on what was known then)."""


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    min_slice: Seconds = 1800
    max_slice: Seconds = 8 * 3600
    max_grace: Seconds = 600
    session_max_gpus: int = 8
    session_max_length: Seconds = 8 * 3600
    session_idle_timeout: Seconds = 3600
    session_max_per_user: int = 2
    default_headroom: int = 8
    headroom: Mapping[str, int] = field(default_factory=dict)
    """GPUs per cluster kept free (or held only by fast-leaving work) for sessions; overrides default_headroom."""
    headroom_max_grace: Seconds = 30
    """Opportunistic work with at most this grace may sit in headroom: it leaves within seconds."""
    opportunistic_price: int = 400
    session_price: int = FULL_PRICE
    usage_half_life: Seconds = 7 * 24 * 3600
    starvation_after: Seconds = 24 * 3600
    """A job waiting this long out-ranks every other budget's slice renewals on the GPUs of its planned start
    (decision 71: a lab where many large gangs wait longer than a day sets a week)."""
    checkpoint_wait: Seconds = 3600
    """The longest a planned start waits past the soonest its GPUs could be free for the work there to save the next
    checkpoint its reports predict (rule `least-lost-work`); 0: it never waits."""
    max_reservations: int = 100
    """Upper bound on planned-start reservations per cycle (one per budget at most)."""
    room_window: Seconds = 24 * 3600
    """The trailing window of session demand the shell sizes each cluster's session room from (changes/room.py);
    0 turns the adaptive part off (the room is the floor, `headroom_for`). The core reads only Snapshot.room."""
    room_quantile: int = 990
    """Per mille: the room covers this quantile of concurrent session GPUs over the window (time-weighted)."""
    default_room_ceiling: int = 32
    room_ceiling: Mapping[str, int] = field(default_factory=dict)
    """The most GPUs per cluster the adaptive room may keep (overrides default_room_ceiling); never below the floor."""
    room_whole_node: bool = True
    """Keep the largest recent session's GPUs on one node of the room (rule `node-shaped-room`)."""
    default_slice: Seconds = 3600
    """The slice of a guaranteed job that names none, clamped to [min_slice, max_slice] (default_slice_of)."""
    default_grace: Seconds = 60
    """The grace of a job or session that names none, capped at max_grace (default_grace_of).
    Settings are added at the end: a pickled policy (the equivalence fixtures) restores by position."""

    def headroom_for(self, cluster: str) -> int:
        """The floor of the cluster's session room (the whole room where the shell sizes none)."""
        return self.headroom.get(cluster, self.default_headroom)

    def ceiling_for(self, cluster: str) -> int:
        return max(self.headroom_for(cluster), self.room_ceiling.get(cluster, self.default_room_ceiling))

    def __setstate__(self, state: Sequence[object]) -> None:
        """pickle's restore (see Job.__setstate__): settings added after a policy was pickled take their defaults."""
        _restore(self, state)

    @property
    def default_slice_of(self) -> Seconds:
        """The slice a guaranteed job gets when it names none: default_slice within [min_slice, max_slice]."""
        return min(max(self.default_slice, self.min_slice), self.max_slice)

    @property
    def default_grace_of(self) -> Seconds:
        """The grace a job or session gets when it names none: default_grace, at most max_grace."""
        return min(self.default_grace, self.max_grace)

    @property
    def default_session_length(self) -> Seconds:
        """The length of a session that names none: default_slice, at most session_max_length."""
        return min(self.default_slice, self.session_max_length)


@dataclass(frozen=True, slots=True)
class SessionRoom:
    """A cluster's session room for one cycle, sized by the shell from recent session demand (changes/room.py):
    `gpus` GPUs free or held by fast-leaving work on unclaimed nodes, `whole` of them on one node (0: any spread)."""

    gpus: int
    whole: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything decide() may look at, as of one instant."""

    clusters: tuple[Cluster, ...]
    nodes: tuple[Node, ...]
    rates: Mapping[str, Micro]
    """Credit-microunits per GPU-hour for each GPU type (H100 1.0 credit → 1_000_000)."""
    budgets: tuple[Budget, ...]
    accounts: Mapping[str, Account]
    jobs: tuple[Job, ...]
    windows: tuple[CapacityWindow, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    room: Mapping[str, SessionRoom] = field(default_factory=dict)
    """Each cluster's session room as the shell sized it; a cluster not named keeps the policy's floor
    (`PolicyConfig.headroom_for`) spread over any nodes. Last, with a default, so older pickles still load."""

    def __setstate__(self, state: Sequence[object]) -> None:
        """pickle's restore (see Job.__setstate__): fields added after a snapshot was pickled take their defaults."""
        _restore(self, state)
