"""The cycle's caches, declared once with typed keys, so every step can name what it reuses.

Owns: the records the caches hold (Terms, Shape, WindowVerdicts), the key types they are looked up by, and
CycleCaches, the one object per cycle that holds them: interned pool and slice-end tuples, each job's pools,
each budget's GPU limits, and funding's shapes, pool costs, window verdicts and Terms.

Every cache here only remembers what a pure function of the snapshot (and, where the key says so, of the money
promised or the window book's version) already returned: dropping one changes no decision, only the time taken.
Several keys hold an `id()` of an interned tuple or Terms object: interned values are kept alive for the cycle and
equal values are one object, so identity is equality (see the core performance rules, core/README.md).

Must not: compute anything (funding.py and state.py fill the caches), or be kept past one cycle.
"""

from __future__ import annotations

from typing import Final

from allotment.core.capacity import Pool
from allotment.core.decisions import Blocker
from allotment.core.model import ContractClass, JobKind, Micro, RunClass, Seconds

Pools = tuple[Pool, ...]
"""A job's usable pools in its order of preference (interned: equal tuples are one object)."""
Ends = tuple[Seconds | None, ...]
"""Slice ends, one per pool of a Terms (interned)."""
PoolCost = tuple[Pool, int, Micro]
"""(pool, GPUs a job holds there, cost of a whole slice there)."""
WindowVerdict = tuple[Seconds, Micro] | None
"""A slice's (end, price) on a pool with windows, or None when a window refuses it."""

PoolsKey = tuple[tuple[str, ...], tuple[str, ...]]
"""(GPU types, clusters) of a job: what its pools depend on."""
ShapeKey = tuple[int, int, int, JobKind, Seconds]
"""(id of the interned pools, GPUs, replicas, kind, slice seconds)."""
PoolCostKey = tuple[Pool, int, int, JobKind, Seconds]
"""(pool, GPUs, replicas, kind, slice seconds)."""
WindowVerdictKey = tuple[Pool, str | None, int, JobKind, Seconds, int]
"""(pool, window owner or None for every other budget, GPUs held, kind, slice seconds, pool's window version)."""
TermsKey = tuple[RunClass, Pools, Ends, Blocker | None]
"""A Terms' value (its tuples interned), for interning Terms themselves."""
BudgetTermsKey = tuple[str, ContractClass, bool, Micro]
"""(budget, contract, fallback to opportunistic, money the budget has promised): Shape.by_budget."""
FoundKey = tuple[str | None, int, int, bool]
"""(window owner, window verdicts' generation — (None, 0) without windows —, how many of the shape's prices the
available money covers, fallback to opportunistic): Shape.found."""
Limits = tuple[tuple[str, int], ...]
"""A budget and its ancestors that have a GPU limit, with the limit."""


class Terms:
    """How a job would run if admitted now: its class, the pools it may use and, per pool, its slice end.

    Interned (CycleCaches.terms): equal Terms are one object within a cycle, so callers may key on their identity."""

    __slots__ = ("blocker", "pools", "run_class", "slice_ends")

    def __init__(self, run_class: RunClass, pools: Pools, slice_ends: Ends, blocker: Blocker | None) -> None:
        self.run_class: Final = run_class
        self.pools: Final = pools
        self.slice_ends: Final = slice_ends
        self.blocker: Final = blocker
        """Why no pool is usable (FUNDS, WINDOW, NO_POOL, …), when `pools` is empty."""

    def slice_end(self, pool: Pool) -> Seconds | None:
        return self.slice_ends[self.pools.index(pool)]


class WindowVerdicts:
    """The window verdicts of one shape for one window owner (or for every other budget)."""

    __slots__ = ("allowed", "generation", "pool_versions", "prices", "refused", "seen", "verdicts")

    def __init__(self, seen: int, pool_versions: list[int], verdicts: list[WindowVerdict]) -> None:
        self.seen = seen
        """The window book's version they reflect."""
        self.pool_versions = pool_versions
        self.verdicts = verdicts
        self.generation = 0
        """Counts changes of `verdicts` (Terms found for older generations are not reused)."""
        self.allowed: tuple[tuple[int, Pool, Seconds, Micro], ...] = ()
        """(position in the usable pools, pool, slice end, price) of the pools with windows a slice may use."""
        self.refused = False
        self.prices: list[Micro] = []
        """Sorted distinct prices of every pool a slice may use."""


class Shape:
    """What funding.terms() needs of one job shape (GPU types, clusters, GPUs, replicas, kind, slice), for the
    cycle."""

    __slots__ = ("by_budget", "found", "opportunistic", "plain", "plain_prices", "usable", "verdicts", "windowed")

    def __init__(
        self,
        usable: tuple[PoolCost, ...],
        plain: tuple[tuple[int, Pool, Micro], ...],
        windowed: tuple[tuple[int, Pool, int, Micro], ...],
        plain_prices: list[Micro],
    ) -> None:
        self.usable = usable
        """(pool, GPUs held there, cost of a whole slice there) for every pool the job could ever run in."""
        self.plain = plain
        """(position in `usable`, pool, cost) for pools without windows."""
        self.windowed = windowed
        """(position, pool, GPUs held, cost) for pools with windows."""
        self.plain_prices = plain_prices
        self.by_budget: dict[BudgetTermsKey, Terms] = {}
        self.verdicts: dict[str | None, WindowVerdicts] = {}
        self.found: dict[FoundKey, Terms] = {}
        self.opportunistic: Terms | None = None
        """The Terms of running opportunistically on the usable pools (or NO_POOL), once found."""


class CycleCaches:
    """Every cache of one cycle (see the module docstring); built empty by CycleState, filled as steps ask."""

    __slots__ = (
        "ends",
        "limits",
        "pool_costs",
        "pools",
        "pools_by_key",
        "pools_of",
        "shapes",
        "terms",
        "window_verdicts",
    )

    def __init__(self) -> None:
        self.pools: dict[Pools, Pools] = {}
        """Interned pool tuples."""
        self.ends: dict[Ends, Ends] = {}
        """Interned slice-end tuples."""
        self.pools_by_key: dict[PoolsKey, Pools] = {}
        self.pools_of: dict[str, Pools] = {}
        """Per job id: its entry in `pools_by_key` (a lookup by the id's cached hash, not by a tuple of tuples)."""
        self.limits: dict[str, Limits] = {}
        """Per budget: CycleState.within_limits' limits to check."""
        self.terms: dict[TermsKey, Terms] = {}
        """The cycle's one Terms object per value."""
        self.shapes: dict[ShapeKey, Shape] = {}
        self.pool_costs: dict[PoolCostKey, PoolCost | None] = {}
        """None: no set of ready nodes of the pool could ever hold a job of that size."""
        self.window_verdicts: dict[WindowVerdictKey, WindowVerdict] = {}

    def intern_pools(self, pools: Pools) -> Pools:
        return self.pools.setdefault(pools, pools)

    def intern_ends(self, ends: Ends) -> Ends:
        return self.ends.setdefault(ends, ends)
