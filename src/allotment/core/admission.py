"""Admitting one pending job: a placement in free GPUs, or a placement bought by preemption (the terms it would run
on come from funding.py).

Owns the rules
- `session-room`: only sessions and work that leaves within seconds may take a cluster below its session room, the
  free and fast-leaving GPUs on nodes no plan claims (promise 9; capacity.Capacity.room); and `node-shaped-room`:
  nor takes the cluster's room node below the room's whole-node session (capacity.Capacity.room_node);
- `backfill-cannot-delay` applied to placement: work that would still hold reserved GPUs at a planned start is kept
  off them, or gets a slice that ends in time (promise 8);
- `never-preempt-in-vain`: victims are chosen only when the preemptor can then start on the GPUs they free — and on
  the CPUs and memory they and work already leaving give back (`cpus-and-memory-beside-gpus`) — and those GPUs are
  reserved for it (promise 1 and the anti-thrash rules).

Must not: choose the order in which jobs are admitted (see pending.py) or emit pending reasons (reasons.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from allotment.core.caches import Terms
from allotment.core.capacity import NodeSlot, Occupant, Pool
from allotment.core.decisions import PreemptReason, Reserve
from allotment.core.model import Job, JobKind, ReservationKind, RunClass, Seconds
from allotment.core.placement import (
    Placement,
    asks_beside,
    choose_block,
    find_free,
    fits_beside,
    node_size,
    nodes_needed,
)
from allotment.core.ranking import VictimKey
from allotment.core.reservations import Capped, backfill_cannot_delay, claim, nobody_yields
from allotment.core.state import CycleState
from allotment.core.victim_index import node_victims


def room_exempt(st: CycleState, job: Job, t: Terms, ignore: bool = False) -> bool:
    """Rule `session-room`: sessions and work that leaves within seconds may use the session room."""
    return ignore or job.kind is JobKind.SESSION or (t.run_class is RunClass.OPPORTUNISTIC and st.ix.quick(job))


def keeps_whole_node(st: CycleState, slot: NodeSlot, gpus: int) -> bool:
    """Rule `node-shaped-room`: does taking `gpus` of the room's GPUs on this node leave the cluster's room node —
    where a session of the largest recent shape would start — with that many GPUs? Only the room node is kept: a
    start elsewhere never takes it, and where no node is whole yet the nearest one is kept so it becomes whole."""
    cluster = slot.node.cluster
    whole = st.ix.whole_for(cluster)
    if whole <= 0 or slot.claim is not None:
        return True
    node = st.cap.room_node(cluster, whole)
    return node is not slot or st.cap.soon(slot) - gpus >= whole


def claim_keeps_whole_node(st: CycleState, slot: NodeSlot) -> bool:
    """Rule `node-shaped-room` for GPUs reserved by preemption: a claimed node is never the room node
    (Capacity.room_node), so a claim takes the whole node from the room, however few of its GPUs the job needs."""
    return keeps_whole_node(st, slot, st.cap.soon(slot))


def _node_filter(
    st: CycleState, job: Job, t: Terms, pool_of: Callable[[NodeSlot], Pool], ignore: bool = False
) -> Callable[[NodeSlot, int], bool]:
    grace = st.ix.grace(job)
    strict = job.kind is JobKind.SESSION
    beside = asks_beside(job)
    ends: dict[Pool, Seconds | None] = {}
    guard = st.ix.whole_rooms and not room_exempt(st, job, t, ignore)

    def ok(slot: NodeSlot, gpus: int) -> bool:
        if not slot.accepts:
            return False
        if slot.claim is None:  # nothing to delay (backfill_cannot_delay's first case)
            return not guard or keeps_whole_node(st, slot, gpus)
        pool = pool_of(slot)
        if pool not in ends:
            ends[pool] = t.slice_end(pool)
        verdict = backfill_cannot_delay(slot, gpus, ends[pool], grace, st.ix.pol.min_slice, st.ix.now, beside)
        return verdict is True or (verdict is not False and not strict)

    return ok


def headroom_allowance(st: CycleState, job: Job, t: Terms, ignore: bool = False) -> Callable[[str], int | None]:
    """The most GPUs the job may take from a cluster's free-or-quick GPUs and still leave its headroom; None when
    the job may use the headroom (sessions and fast-leaving work)."""
    exempt = room_exempt(st, job, t, ignore)

    def allowance(cluster: str) -> int | None:
        return None if exempt else st.cap.room(cluster) - st.ix.room_for(cluster)

    return allowance


def headroom_filter(st: CycleState, job: Job, t: Terms, ignore: bool = False) -> Callable[[str, int], bool]:
    exempt = room_exempt(st, job, t, ignore)

    def ok(cluster: str, gpus: int) -> bool:
        return exempt or st.cap.room(cluster) - gpus >= st.ix.room_for(cluster)

    return ok


def final_slice_end(st: CycleState, job: Job, t: Terms, placement: Placement) -> Seconds | None:
    """The slice end after capping it at any planned start on the chosen nodes."""
    end = t.slice_end(placement.pool)
    if end is None:
        return None
    grace = st.ix.grace(job)
    beside = asks_beside(job)
    for idx, gpus in placement.nodes:
        verdict = backfill_cannot_delay(st.cap.nodes[idx], gpus, end, grace, st.ix.pol.min_slice, st.ix.now, beside)
        if isinstance(verdict, Capped):
            end = min(end, verdict.end)
    return end


def place_free(
    st: CycleState, job: Job, t: Terms, ignore_headroom: bool = False, claimed_gangs: bool = False
) -> Placement | None:
    if not st.cap.could_fit(job.gpus, job.replicas, t.pools):
        return None  # no pool has a node with enough free GPUs, or enough whole free nodes
    node_ok = _node_filter(st, job, t, lambda s: s.pool, ignore_headroom)
    cluster_ok = headroom_filter(st, job, t, ignore_headroom)
    return find_free(job, t.pools, st.cap, node_ok, cluster_ok, st.ix.topology, claimed_gangs)


def start_free(st: CycleState, job: Job, t: Terms, placement: Placement, rule: str) -> None:
    st.start(job, placement, t.run_class, final_slice_end(st, job, t, placement), rule)


def frees_beside(job: Job, slot: NodeSlot, gpus: int, victims: Iterable[tuple[Occupant, PreemptReason]]) -> bool:
    """Rule `never-preempt-in-vain` for CPUs and memory: once the victims and the work already leaving this node are
    gone, do its CPUs and memory hold the job's replicas there beside `gpus` of its GPUs?"""
    cpus = memory = 0
    for occ in slot.occupants:
        if occ.leaving:
            cpus += occ.cpus
            memory += occ.memory
    for occ, _ in victims:
        if not occ.leaving:
            cpus += occ.cpus
            memory += occ.memory
    return fits_beside(job, slot, gpus, cpus, memory)


VictimRule = Callable[[Occupant], PreemptReason | None]
Indexed = tuple[VictimKey, VictimRule, bool]
"""(key, rule, same on expired): a rule that looks at the occupant alone, named by `key` in the cycle's victim index,
and whether it agrees with the preemptor's own rule on nodes holding preemptible slice-expired work too (elsewhere it
must agree always)."""


def place_by_preemption(
    st: CycleState,
    job: Job,
    t: Terms,
    rule: VictimRule,
    pools: Sequence[Pool] | None = None,
    ignore_headroom: bool = False,
    indexed: Indexed | None = None,
) -> bool:
    """Free GPUs for the job by preempting work the rule allows, reserve them for it, and return True; or change
    nothing and return False when no choice of victims lets the job start (rule `never-preempt-in-vain`).

    Only nodes whose reach (free, leaving and preemptible GPUs) covers the need are searched: victim rules never
    offer work inside its slice. With `indexed`, nodes are read from the cycle's victim index in the order they are
    preferred (a single-node job takes the first usable one), and only nodes where the index's rule may differ from
    `rule` are searched afresh."""
    now = st.ix.now
    allowance = headroom_allowance(st, job, t, ignore_headroom)
    best: tuple[tuple[int, int], Pool, list[tuple[int, int]], list[tuple[Occupant, PreemptReason]], Seconds] | None
    best = None
    beside = asks_beside(job)
    for pool in pools if pools is not None else t.pools:
        size = node_size(st.cap, pool)
        k = nodes_needed(job, size)
        need = job.total_gpus if k == 1 else size
        # headroom: the claim takes the node's part of the room, its free and fast-leaving GPUs (found[3] below)
        room = allowance(pool[0])
        if k == 0 or (room is not None and room < 0):
            continue
        per_node: dict[int, tuple[list[tuple[Occupant, PreemptReason]], Seconds, tuple[int, int]]] = {}
        afresh: Iterable[int]
        if indexed is None:
            afresh = st.cap.nodes_with_reach(pool, need)
        else:
            key, base, same_on_expired = indexed
            afresh = () if same_on_expired else st.cap.expired_nodes[pool]
            for idx, found in st.victims.ranked(key, base, pool, need):
                slot = st.cap.nodes[idx]
                if idx in afresh or slot.claim is not None or (k > 1 and slot.node.gpus != size):
                    continue
                if beside and not frees_beside(job, slot, need, found[0]):
                    continue
                if room is None or (found[3] <= room and claim_keeps_whole_node(st, slot)):
                    per_node[idx] = (found[0], found[1], found[2])
                    if k == 1:
                        break  # the index is in order of preference
        for idx in afresh:
            slot = st.cap.nodes[idx]
            if slot.reach < need or slot.claim is not None or slot.node.gpus < need:
                continue
            if k > 1 and slot.node.gpus != size:
                continue
            fresh = node_victims(slot, need, now, rule, st.ix.grace)
            if fresh is None or (room is not None and (fresh[3] > room or not claim_keeps_whole_node(st, slot))):
                continue
            if beside and not frees_beside(job, slot, need, fresh[0]):
                continue
            per_node[idx] = (fresh[0], fresh[1], fresh[2])
        if len(per_node) < k:
            continue
        if k == 1:
            idx = min(per_node, key=lambda i: (per_node[i][2], per_node[i][1], i))
            chosen = [idx]
        else:
            cands = [(i, float(c[2][0] * 1_000_000 + c[2][1])) for i, c in per_node.items()]
            picked = choose_block(cands, k, st.cap, st.ix.topology.get(pool[0], ()))
            if picked is None:
                continue
            chosen = picked
        cost = (sum(per_node[i][2][0] for i in chosen), sum(per_node[i][2][1] for i in chosen))
        victims = [v for i in chosen for v in per_node[i][0]]
        ready = max(per_node[i][1] for i in chosen)
        if best is None or cost < best[0]:
            best = (cost, pool, [(i, need) for i in chosen], victims, ready)
    if best is None:
        return False
    _, pool, nodes, victims, ready = best
    for occ, reason in victims:
        st.preempt(occ.job, reason, job.id)
    claim(st.cap, job.id, nodes, ready, nobody_yields)
    names = tuple((st.cap.nodes[i].node.name, g) for i, g in nodes)
    st.out.mark_reserved(Reserve(job.id, names, ready, ReservationKind.PREEMPTION, now))
    held = sum(g for _, g in nodes)
    st.fs.hold(job.budget, held * st.ix.rate(pool) / 1_000_000)
    end = t.slice_end(pool)
    promised = None if end is None else st.ix.slice_cost(job, held, pool, end - now)
    st.out.admit(job, st.fs.ancestors(job.budget), held, promised, job.kind is JobKind.SESSION)
    return True
