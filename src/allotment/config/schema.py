"""The configuration's schema: pydantic models of every section of an Allotment YAML file.

Owns: the shape of `credits`, `fleet`, `budgets`, `users`, `period`, `policy`, `windows` and `run_as`, their per-field
rules (unknown keys are errors), and read-only helpers over the validated data (look-ups, the budget tree,
memberships, period boundaries).

Must not: check rules that span sections or list items (unique names, references, tree sums: see `checks`),
read files (see `load`), or build core types (see `convert`).
"""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from allotment.config.fields import (
    EMAIL_PATTERN,
    Cpus,
    Credits,
    Day,
    Duration,
    Memory,
    Name,
    NonNegativeInt,
    PositiveInt,
    Price,
    Rate,
    Timestamp,
    UnixAccount,
)
from allotment.core.model import FULL_PRICE, PolicyConfig

_CORE_POLICY = PolicyConfig()


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeGroup(_Model):
    """`count` identical nodes of one GPU type, named `<prefix>-<index>` and labelled by rack and block."""

    gpu_type: Name
    count: PositiveInt
    gpus_per_node: PositiveInt = 8
    prefix: Name | None = None
    """Node name prefix; default `<cluster>-<gpu_type in lower case>`."""
    rack_size: PositiveInt | None = None
    """Nodes per rack (needed when the cluster's topology names `rack`)."""
    block_size: PositiveInt | None = None
    """Racks per block (needed when the cluster's topology names `block`)."""
    cpus_per_node: Cpus = 0
    """CPUs each node offers to jobs; 0 or absent: not declared, CPU requests are not counted (decision 60)."""
    memory_per_node: Memory = 0
    """Memory each node offers to jobs (`512G`, `2T`, or MiB); 0 or absent: not declared, not counted."""


class OverrideState(StrEnum):
    CORDONED = "cordoned"
    DRAINING = "draining"
    DOWN = "down"


class NodeOverride(_Model):
    """A node whose state is not `ready`."""

    node: Name
    state: OverrideState
    forced: StrictBool = False
    """Only with `draining`: an administrator's forced drain (every job leaves now, owners refunded)."""


class ClusterConfig(_Model):
    name: Name
    topology: tuple[Name, ...] = ()
    """Topology label keys, tightest first: [], [rack] or [rack, block]."""
    node_groups: tuple[NodeGroup, ...] = Field(min_length=1)
    node_states: tuple[NodeOverride, ...] = ()


class Fleet(_Model):
    clusters: tuple[ClusterConfig, ...] = Field(min_length=1)


class Role(StrEnum):
    ADMIN = "admin"  # administers the whole organisation (budgets, forced actions)
    OPERATOR = "operator"  # runs the fleet (drains, node states)
    LEAD = "lead"  # manages a budget subtree (members, allocations below it)
    MEMBER = "member"  # submits jobs charged to the budget


class Member(_Model):
    user: Name
    role: Role = Role.MEMBER


class BudgetConfig(_Model):
    """A node of the organisation tree; `parent` names its parent (none for a root)."""

    name: Name
    parent: Name | None = None
    allocation: Credits
    """Credits per period."""
    max_gpus: PositiveInt | None = None
    members: tuple[Member, ...] = ()
    description: str = ""


class User(_Model):
    name: Name
    full_name: str = Field(min_length=1, max_length=200)
    email: str = Field(pattern=EMAIL_PATTERN, max_length=254)


class PeriodLength(StrEnum):
    WEEK = "week"
    MONTH = "month"
    QUARTER = "quarter"


def _add_months(day: date, months: int) -> date:
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


class Period(_Model):
    """The budgeting period: allocations renew at each period start (UTC midnight)."""

    length: PeriodLength = PeriodLength.MONTH
    starts: Day
    """The first day of the first period (for month and quarter: day 1–28)."""
    carry_over: StrictBool = False
    """Whether unspent credits carry over into the next period."""

    def start_of(self, index: int) -> datetime:
        """Start of period number `index` (0 is the one beginning at `starts`; negative indices go back)."""
        if self.length is PeriodLength.WEEK:
            day = self.starts + timedelta(weeks=index)
        else:
            day = _add_months(self.starts, index * (1 if self.length is PeriodLength.MONTH else 3))
        return datetime(day.year, day.month, day.day, tzinfo=UTC)

    def index_at(self, at: datetime) -> int:
        """The number of the period containing `at` (a timezone-aware datetime)."""
        first = self.start_of(0)
        if self.length is PeriodLength.WEEK:
            return (at - first) // timedelta(weeks=1)
        step = 1 if self.length is PeriodLength.MONTH else 3
        index = ((at.year - first.year) * 12 + at.month - first.month) // step
        while self.start_of(index) > at:
            index -= 1
        while self.start_of(index + 1) <= at:
            index += 1
        return index

    def bounds(self, at: datetime) -> tuple[datetime, datetime]:
        """[start, end) of the period that contains `at`."""
        index = self.index_at(at)
        return self.start_of(index), self.start_of(index + 1)


class Policy(_Model):
    """Every setting of core.model.PolicyConfig; durations as `30m`, `8h`, `2d`, `90s` or seconds."""

    min_slice: Duration = _CORE_POLICY.min_slice
    max_slice: Duration = _CORE_POLICY.max_slice
    max_grace: Duration = _CORE_POLICY.max_grace
    default_slice: Duration = _CORE_POLICY.default_slice
    """The slice of a guaranteed job (and the length of a session) that names none; clamped to the limits."""
    default_grace: Duration = _CORE_POLICY.default_grace
    """The grace of a job or session that names none; capped at max_grace."""
    session_max_gpus: PositiveInt = _CORE_POLICY.session_max_gpus
    session_max_length: Duration = _CORE_POLICY.session_max_length
    session_idle_timeout: Duration = _CORE_POLICY.session_idle_timeout
    session_max_per_user: NonNegativeInt = _CORE_POLICY.session_max_per_user
    default_headroom: NonNegativeInt = _CORE_POLICY.default_headroom
    headroom: dict[Name, NonNegativeInt] = Field(default_factory=dict)
    """GPUs kept free per cluster for sessions (overrides default_headroom)."""
    headroom_max_grace: Duration = _CORE_POLICY.headroom_max_grace
    opportunistic_price: Price = Decimal(_CORE_POLICY.opportunistic_price) / FULL_PRICE
    """Fraction of the full price charged for opportunistic work (0.4 is a 60 % discount)."""
    session_price: Price = Decimal(_CORE_POLICY.session_price) / FULL_PRICE
    usage_half_life: Duration = _CORE_POLICY.usage_half_life
    starvation_after: Duration = _CORE_POLICY.starvation_after
    """A job waiting this long out-ranks every other budget's slice work on the GPUs of its planned start (no
    budget waits forever); until then other budgets give way to it by fair share alone."""
    checkpoint_wait: Duration = _CORE_POLICY.checkpoint_wait
    """The longest a planned start waits for the work it calls away to save its next checkpoint, predicted from the
    job's reports (rule `least-lost-work`); 0 never waits."""
    max_reservations: NonNegativeInt = _CORE_POLICY.max_reservations
    room_window: Duration = _CORE_POLICY.room_window
    """Trailing window of session demand the session room is sized from; 0 keeps the room at its floor (headroom)."""
    room_quantile: Price = Decimal(_CORE_POLICY.room_quantile) / FULL_PRICE
    """The share of the window's time whose concurrent session GPUs the room covers (0.99: the p99)."""
    default_room_ceiling: NonNegativeInt = _CORE_POLICY.default_room_ceiling
    room_ceiling: dict[Name, NonNegativeInt] = Field(default_factory=dict)
    """The most GPUs per cluster the adaptive room keeps (overrides default_room_ceiling; never below the floor)."""
    room_whole_node: bool = _CORE_POLICY.room_whole_node
    """Keep the largest recent session's GPUs free on one node of the room."""


class WindowConfig(_Model):
    """A budget's right to `gpus` GPUs of the pool (cluster, gpu_type) during [start, end)."""

    id: Name
    budget: Name
    cluster: Name
    gpu_type: Name
    gpus: PositiveInt
    start: Timestamp
    end: Timestamp


class RunAsMode(StrEnum):
    OWNER = "owner"
    SINGLE_USER = "single-user"
    AUTO = "auto"


class RunAs(_Model):
    """Whose Unix account a job runs as (docs/security.md).

    `owner`: each job runs as its owner's account (the user's name, or `accounts[user]`); the server must be
    privileged (root) and a user with no account cannot submit. `single-user`: every job runs as the server's own
    account (a laptop, the demo); the server says so at start-up and in /health. `auto`: owner when the server is
    privileged, single-user otherwise."""

    mode: RunAsMode = RunAsMode.SINGLE_USER
    accounts: dict[Name, UnixAccount] = Field(default_factory=dict)
    """Allotment user → Unix account, for users whose account is not named like them."""


class AllotmentConfig(_Model):
    """A whole, validated configuration. Build it with `load_config` or `parse_config`, which also check the
    rules that span sections."""

    credits: dict[Name, Rate] = Field(min_length=1)
    """GPU type → credits per GPU-hour."""
    fleet: Fleet
    budgets: tuple[BudgetConfig, ...] = Field(min_length=1)
    users: tuple[User, ...] = ()
    period: Period
    policy: Policy = Field(default_factory=Policy)
    windows: tuple[WindowConfig, ...] = ()
    run_as: RunAs = Field(default_factory=RunAs)

    def budget(self, name: str) -> BudgetConfig:
        for budget in self.budgets:
            if budget.name == name:
                return budget
        raise KeyError(name)

    def user(self, name: str) -> User:
        for user in self.users:
            if user.name == name:
                return user
        raise KeyError(name)

    def cluster(self, name: str) -> ClusterConfig:
        for cluster in self.fleet.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    def roots(self) -> tuple[BudgetConfig, ...]:
        return tuple(b for b in self.budgets if b.parent is None)

    def children(self, name: str) -> tuple[BudgetConfig, ...]:
        return tuple(b for b in self.budgets if b.parent == name)

    def leaves(self) -> tuple[BudgetConfig, ...]:
        parents = {b.parent for b in self.budgets}
        return tuple(b for b in self.budgets if b.name not in parents)

    def ancestors(self, name: str) -> tuple[str, ...]:
        """Names from the budget's parent up to its root."""
        by_name = {b.name: b for b in self.budgets}
        out: list[str] = []
        parent = by_name[name].parent
        while parent is not None and parent not in out:
            out.append(parent)
            parent = by_name[parent].parent if parent in by_name else None
        return tuple(out)

    def gpu_limit(self, name: str) -> int | None:
        """The most GPUs the budget may hold at once: the smallest `max_gpus` of it and its ancestors (None: no
        limit)."""
        caps = [c for n in (name, *self.ancestors(name)) if (c := self.budget(n).max_gpus) is not None]
        return min(caps, default=None)

    def depth(self) -> int:
        """Levels of the budget tree (1 for a flat list of roots)."""
        return max(len(self.ancestors(b.name)) + 1 for b in self.budgets)

    def members(self, budget: str) -> tuple[Member, ...]:
        return self.budget(budget).members

    def memberships(self, user: str) -> tuple[tuple[str, Role], ...]:
        """(budget, role) for every budget that lists the user."""
        return tuple((b.name, m.role) for b in self.budgets for m in b.members if m.user == user)

    def gpus_by_type(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for cluster in self.fleet.clusters:
            for group in cluster.node_groups:
                totals[group.gpu_type] = totals.get(group.gpu_type, 0) + group.count * group.gpus_per_node
        return totals

    def pool_sizes(self) -> dict[tuple[str, str], int]:
        """(cluster, gpu_type) → GPUs of every node in the pool, whatever its state."""
        sizes: dict[tuple[str, str], int] = {}
        for cluster in self.fleet.clusters:
            for group in cluster.node_groups:
                key = (cluster.name, group.gpu_type)
                sizes[key] = sizes.get(key, 0) + group.count * group.gpus_per_node
        return sizes
