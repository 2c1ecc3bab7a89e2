"""Where a preemption could free GPUs, kept for the cycle, for victim rules that look at the occupant alone.

Owns: for one rule (named by a key), GPU need and pool, the victims each node of the pool offers
(preemption.victims_on_node) and the GPUs they would take from session headroom, kept in the order
place_by_preemption prefers nodes — fewest GPUs, then least lost progress, then the earliest ready time, then the node
index — and refreshed lazily from the nodes that changed since it was last read (ranking.NodeRanking). Only nodes whose
reach covers the need are searched (victim rules never offer work inside its slice, so no other node can be freed).

Claimed nodes are left out (a reservation holds them). Must not: apply headroom (it changes between reads: the
caller filters), emit decisions or change capacity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from allotment.core.capacity import Capacity, NodeSlot, Occupant, Pool
from allotment.core.decisions import PreemptReason
from allotment.core.model import Job, Seconds
from allotment.core.preemption import VictimTest, victims_on_node
from allotment.core.ranking import Rankings, VictimKey

NodeVictims = tuple[list[tuple[Occupant, PreemptReason]], Seconds, tuple[int, int], int]
"""Victims on one node for one need: (victims with reasons, when the GPUs are free, (GPUs, lost progress), GPUs the
preemptor's claim would take from the session room: Capacity.room_on)."""


def node_victims(
    slot: NodeSlot,
    need: int,
    now: Seconds,
    rule: VictimTest,
    grace: Callable[[Job], int],
) -> NodeVictims | None:
    v = victims_on_node(slot, need, now, rule, grace)
    if v is None:
        return None
    # the preemptor's reservation claims the node, and a claim takes the node's whole part of the room
    # (Capacity.room_on): its free GPUs and all the fast-leaving work the room counts there, victims or not
    return list(zip(v.occupants, v.reasons, strict=True)), v.ready_at, v.cost, Capacity.room_on(slot)


class VictimIndex:
    def __init__(
        self,
        rankings: Rankings,
        cap: Capacity,
        now: Seconds,
        grace: Callable[[Job], int],
    ) -> None:
        self._rankings = rankings
        self._cap = cap
        self._now = now
        self._grace = grace

    def ranked(self, key: VictimKey, rule: VictimTest, pool: Pool, need: int) -> Iterator[tuple[int, NodeVictims]]:
        """(node index, victims) for every node of the pool where `rule` (named by `key`: equal keys must mean
        equal verdicts for every occupant) can free `need` GPUs, best first."""
        now, grace = self._now, self._grace

        def value(slot: NodeSlot) -> NodeVictims | None:
            if not slot.accepts or slot.claim is not None or slot.reach < need or slot.node.gpus < need:
                return None
            return node_victims(slot, need, now, rule, grace)

        def order(found: NodeVictims) -> tuple[tuple[int, int], Seconds]:
            return found[2], found[1]

        ranking = self._rankings.get(
            ("victims", key, need), pool, lambda: self._cap.nodes_with_reach(pool, need), value, order
        )
        return iter(ranking)
