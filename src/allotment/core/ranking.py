"""Nodes of one pool kept in order of a per-node value for the rest of the cycle, refreshed from Capacity's change log.

Owns: a sorted list of (value, node index) for the nodes of one pool that have a value (the function given returns
None for the nodes it leaves out), and bringing it up to date when it is read: the nodes that changed since (their
free GPUs, occupants or claim: Capacity.changes) get their value computed again. The value may therefore depend only
on a node's free GPUs, occupants, claim and fixed properties, never on other nodes.

Must not: decide anything or change capacity.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from allotment.core.capacity import Capacity, NodeSlot, Pool

V = TypeVar("V")

VictimKey = tuple[str, ...]
"""Names a victim rule that looks at the occupant alone: ("session",), ("window", owner), ("for-guaranteed",)."""
RankingName = tuple[str, int, bool] | tuple[str, VictimKey, int]
"""("earliest", GPUs needed, free GPUs count) or ("victims", victim rule, GPUs needed): everything a ranking's
value depends on besides the node."""


class NodeRanking(Generic[V]):
    def __init__(
        self,
        cap: Capacity,
        pool: Pool,
        nodes: Iterable[int],
        value: Callable[[NodeSlot], V | None],
        order: Callable[[V], Any],
    ) -> None:
        """`nodes`: every node of the pool that has a value now (others may be given: they are left out when their
        value is None); `order`: the sort key of a value (ties go to the lower node index)."""
        self._cap = cap
        self._log = cap.changes[pool]
        self._seen = len(self._log)
        self._value = value
        self._order = order
        self._found: dict[int, V] = {}
        self._sorted: list[tuple[Any, int]] = []
        for idx in nodes:
            found = value(cap.nodes[idx])
            if found is not None:
                self._found[idx] = found
                self._sorted.append((order(found), idx))
        self._sorted.sort()

    def __iter__(self) -> Iterator[tuple[int, V]]:
        """(node index, value) in order, best first."""
        if self._seen < len(self._log):
            self._refresh()
        found = self._found
        return ((idx, found[idx]) for _, idx in self._sorted)

    def _refresh(self) -> None:
        for idx in dict.fromkeys(self._log[self._seen :]):
            old = self._found.pop(idx, None)
            if old is not None:
                del self._sorted[bisect_left(self._sorted, (self._order(old), idx))]
            found = self._value(self._cap.nodes[idx])
            if found is not None:
                self._found[idx] = found
                insort(self._sorted, (self._order(found), idx))
        self._seen = len(self._log)


class Rankings:
    """The cycle's rankings, one per name (which must say everything the value depends on besides the node)."""

    def __init__(self, cap: Capacity) -> None:
        self._cap = cap
        self._made: dict[tuple[RankingName, Pool], NodeRanking[Any]] = {}
        """Rankings of different value types, one per name and pool."""

    def get(
        self,
        name: RankingName,
        pool: Pool,
        nodes: Callable[[], Iterable[int]],
        value: Callable[[NodeSlot], V | None],
        order: Callable[[V], Any],
    ) -> NodeRanking[V]:
        found = self._made.get((name, pool))
        if found is None:
            found = self._made[(name, pool)] = NodeRanking(self._cap, pool, nodes(), value, order)
        return found

    def clear(self) -> None:
        """Forget every ranking (their value functions may refer back to the cycle's state)."""
        self._made.clear()
