"""Gang placement (rule `gang-placement`, docs/policy.md §3): where a job's GPUs go.

Owns: the pools a job may use in preference order, how many nodes a gang needs, best-fit packing of single-node jobs
(the fullest node that still fits, so whole nodes stay free for gangs), the choice of k whole nodes in the
tightest topology block (rack, then block, then the cluster) for multi-node gangs, and rule
`cpus-and-memory-beside-gpus`: a node takes the job's GPUs only where its free CPUs and memory also hold the job's
replicas there (`fits_beside`; decision 60).

Must not: decide whether a job may start (funds, order, headroom, reservations) beyond the per-node and per-cluster
filters it is given, and must not change capacity (the cycle takes the GPUs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from allotment.core.capacity import Capacity, NodeSlot, Pool, replicas_on
from allotment.core.model import Job, Micro


class Placement:
    """Where a job would run: one pool and GPUs per node (a plain class: core performance rules, 1)."""

    __slots__ = ("nodes", "pool")

    def __init__(self, pool: Pool, nodes: tuple[tuple[int, int], ...]) -> None:
        self.pool: Final = pool
        self.nodes: Final = nodes
        """(node index, GPUs on that node)."""

    @property
    def gpus(self) -> int:
        return sum(g for _, g in self.nodes)


NodeFilter = Callable[[NodeSlot, int], bool]
ClusterFilter = Callable[[str, int], bool]


def pools_for(job: Job, capacity: Capacity, rates: Mapping[str, Micro]) -> list[Pool]:
    """The pools the job allows, in its own preference order (pool_preference)."""
    pools = [p for p in capacity.pools if allows(job, p)]
    pools.sort(key=pool_preference(job, rates))
    return pools


def allows(job: Job, pool: Pool) -> bool:
    """Does the job allow this pool (the GPU types and clusters it names, if any)?"""
    return (not job.gpu_types or pool[1] in job.gpu_types) and (not job.clusters or pool[0] in job.clusters)


def pool_preference(job: Job, rates: Mapping[str, Micro]) -> Callable[[Pool], tuple[int, int, Pool]]:
    """The sort key of a job's pools in its own preference order: the order it lists GPU types and clusters in; when
    it names no GPU type, cheaper types come first. The session room's demand is counted where it would start by this
    same order (changes/room.py)."""
    type_rank = {t: i for i, t in enumerate(job.gpu_types)}
    cluster_rank = {c: i for i, c in enumerate(job.clusters)}

    def key(p: Pool) -> tuple[int, int, Pool]:
        return (type_rank.get(p[1], rates.get(p[1], 0)), cluster_rank.get(p[0], 0), p)

    return key


def node_size(capacity: Capacity, pool: Pool) -> int:
    return capacity.node_size.get(pool, 0)


def nodes_needed(job: Job, size: int) -> int:
    """Nodes a gang needs on nodes of `size` GPUs: one if the whole gang fits on one node, else whole nodes holding
    as many replicas each as fit. 0 when a single replica is larger than a node (it can never run there)."""
    return nodes_for(job.gpus, job.replicas, size)


def nodes_for(gpus: int, replicas: int, size: int) -> int:
    """`nodes_needed` for a gang of `replicas` × `gpus` (the same rule, for callers without a Job)."""
    if size <= 0 or gpus > size or gpus <= 0:
        return 0
    if gpus * replicas <= size:
        return 1
    per_node = size // gpus
    return -(-replicas // per_node)


def gpus_held(job: Job, size: int) -> int:
    """GPUs the job holds on nodes of `size` GPUs: its own count on one node, whole nodes for multi-node gangs."""
    k = nodes_needed(job, size)
    return job.total_gpus if k <= 1 else k * size


def asks_beside(job: Job) -> bool:
    """Does the job ask for CPUs or memory beside its GPUs? (Nothing is counted for one that does not.)"""
    return job.cpus > 0 or job.memory > 0


def fits_beside(job: Job, slot: NodeSlot, gpus: int, cpus_back: int = 0, memory_back: int = 0) -> bool:
    """Rule `cpus-and-memory-beside-gpus`: do the node's free CPUs and memory (plus `cpus_back`, `memory_back`: what
    work leaving for this job gives back) hold the replicas the job would have there with `gpus` of its GPUs?"""
    r = replicas_on(job.gpus, gpus)
    return (job.cpus == 0 or slot.cpus_free + cpus_back >= r * job.cpus) and (
        job.memory == 0 or slot.memory_free + memory_back >= r * job.memory
    )


def find_free(
    job: Job,
    pools: Sequence[Pool],
    capacity: Capacity,
    node_ok: NodeFilter,
    cluster_ok: ClusterFilter,
    topology: Mapping[str, tuple[str, ...]],
    claimed_gangs: bool = False,
) -> Placement | None:
    """Place the whole gang in free GPUs of one pool, or return None (promise 7: whole, in one cluster, or not).
    A gang of several nodes is placed where its room allows k unclaimed nodes; with `claimed_gangs` also on claimed
    nodes (backfill that cannot delay their plans), where only the unclaimed nodes it takes count against the room."""
    for pool in pools:
        size = node_size(capacity, pool)
        k = nodes_needed(job, size)
        if k == 0:
            continue
        if k == 1:
            need = job.total_gpus
            if capacity.max_free_in_pool(pool) < need:
                continue
            # the cluster's session room counts only unclaimed nodes: a start on a claimed node (backfill that
            # cannot delay the plan) leaves the room as it is
            room_ok = cluster_ok(pool[0], need)
            beside = asks_beside(job)
            for idx in capacity.nodes_with_free(pool, need):
                slot = capacity.nodes[idx]
                fits = not beside or fits_beside(job, slot, need)
                if fits and (room_ok or slot.claim is not None) and node_ok(slot, need):
                    return Placement(pool, ((idx, need),))
            continue
        if len(capacity.nodes_with_free(pool, size)) < k:
            continue
        # `unclaimed`: how many nodes no plan claims the gang may take and leave the room. Without `claimed_gangs` the
        # room must allow all k of them; with it, as for one node, only those count against the room, and they cost 1
        # to the block's choice (claimed ones 0) so that it takes the fewest it can
        if not claimed_gangs:
            if not cluster_ok(pool[0], k * size):
                continue
            unclaimed = k
        else:
            unclaimed = _unclaimed_allowed(pool[0], k, size, cluster_ok)
        beside = asks_beside(job)
        whole = [
            (idx, 0.0 if capacity.nodes[idx].claim is not None else 1.0)
            for idx in capacity.nodes_with_free(pool, size)
            if capacity.nodes[idx].node.gpus == size
            and (unclaimed > 0 or capacity.nodes[idx].claim is not None)
            and node_ok(capacity.nodes[idx], size)
            and (not beside or fits_beside(job, capacity.nodes[idx], size))
        ]
        if unclaimed == k:
            whole = [(idx, 0.0) for idx, _ in whole]  # the room allows any k: choose by topology alone, as before
        chosen = choose_block(whole, k, capacity, topology.get(pool[0], ()))
        if chosen is not None and sum(capacity.nodes[i].claim is None for i in chosen) <= unclaimed:
            return Placement(pool, tuple((idx, size) for idx in chosen))
    return None


def _unclaimed_allowed(cluster: str, k: int, size: int, cluster_ok: ClusterFilter) -> int:
    """The most whole unclaimed nodes (at most k) a gang may take and leave the cluster its room."""
    for m in range(k, 0, -1):
        if cluster_ok(cluster, m * size):
            return m
    return 0


def choose_block(
    candidates: list[tuple[int, float]],
    k: int,
    capacity: Capacity,
    levels: tuple[str, ...],
    by_kth: bool = False,
    tightest: bool = False,
) -> list[int] | None:
    """Choose k nodes from (node index, cost) candidates: the tightest topology level at which some group holds k
    candidates, and in it the group with the lowest cost (sum of its k cheapest, or the k-th cheapest when `by_kth`,
    as for a planned start), then the fewest spare candidates (best fit), then the group name. Ties between levels
    go to the tighter level only when its cost is as good as the whole cluster's — or always, when `tightest` (the
    costs are not times, so a looser level's lower cost would buy nothing a gang wants more than its topology)."""
    if len(candidates) < k:
        return None
    ordered = sorted(candidates, key=lambda c: (c[1], c[0]))

    def score(group: list[tuple[int, float]]) -> float:
        best = group[:k]
        return best[-1][1] if by_kth else sum(c for _, c in best)

    overall = score(ordered)
    for level in levels:
        groups: dict[str, list[tuple[int, float]]] = {}
        for cand in ordered:
            label = capacity.nodes[cand[0]].node.label(level)
            if label is not None:
                groups.setdefault(label, []).append(cand)
        fitting = [(score(g), len(g), name, g) for name, g in groups.items() if len(g) >= k]
        if not fitting:
            continue
        best_score, _, _, group = min(fitting, key=lambda f: (f[0], f[1], f[2]))
        if tightest or best_score <= overall:
            return sorted(idx for idx, _ in group[:k])
    return sorted(idx for idx, _ in ordered[:k])
