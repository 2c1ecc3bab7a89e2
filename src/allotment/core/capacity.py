"""The cycle's working picture of the fleet: which GPUs are free, who holds the rest, and what is promised.

Owns: per-node free GPU indices, the running jobs on each node and when each could leave, per-pool best-fit buckets,
per-cluster quick-free counts (for session headroom), per-node reservation claims, and per-window slice counters.
It changes only as the cycle decides (GPUs taken by starts, claimed by reservations); preempted GPUs are not free
until the executor reports the victim gone, so nothing here frees GPUs.

Must not: decide anything. The rules live in placement, preemption, reservations and cycle.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass, field

from allotment.core.model import ContractClass, Job, Node, Seconds, Snapshot

Pool = tuple[str, str]
"""(cluster, gpu_type)"""


@dataclass(slots=True)
class Claim:
    """A reservation's hold on one node: `gpus` GPUs from `planned_start` on."""

    job_id: str
    gpus: int
    planned_start: Seconds
    spare: int
    """GPUs of this node that others may still hold past planned_start without delaying it."""
    yields: Callable[[Occupant], bool]
    """Which running work on the node gives way to the holder (is not renewed in its way, may be preempted for it)."""


@dataclass(slots=True)
class Occupant:
    """A running job's hold on one node, as the cycle sees it."""

    job: Job
    gpus: int
    leave: Seconds
    """The earliest time its GPUs on this node could be free: kill deadline if preempting, slice end + grace if
    inside its slice, now + grace otherwise."""
    preemptible: bool
    """Not inside a run slice and not already leaving."""
    leaving: bool
    node: int
    """Index of the node slot it sits on."""


@dataclass(slots=True)
class NodeSlot:
    idx: int
    node: Node
    pool: Pool
    free: list[int]
    occupants: list[Occupant] = field(default_factory=list)
    claim: Claim | None = None
    accepts: bool = False

    def __post_init__(self) -> None:
        self.accepts = self.node.accepts_work


def grace_of(job: Job, max_grace: Seconds) -> Seconds:
    return max(0, min(job.grace, max_grace))


def is_quick(job: Job, headroom_max_grace: Seconds, max_grace: Seconds) -> bool:
    """Work that can leave within seconds: opportunistic with a short grace, held without a slice."""
    return (
        job.run is not None
        and job.run.slice_end is None
        and job.contract is ContractClass.OPPORTUNISTIC
        and grace_of(job, max_grace) <= headroom_max_grace
    )


class Capacity:
    def __init__(self, snapshot: Snapshot, now: Seconds) -> None:
        pol = snapshot.policy
        self.now = now
        self.nodes: list[NodeSlot] = []
        self.index: dict[str, int] = {}
        for i, node in enumerate(sorted(snapshot.nodes, key=lambda n: (n.cluster, n.gpu_type, n.name))):
            self.index[node.name] = i
            self.nodes.append(NodeSlot(i, node, (node.cluster, node.gpu_type), list(range(node.gpus))))
        self.pools: dict[Pool, list[int]] = {}
        for slot in self.nodes:
            self.pools.setdefault(slot.pool, []).append(slot.idx)
        self.node_size: dict[Pool, int] = {
            pool: max(self.nodes[i].node.gpus for i in idxs) for pool, idxs in self.pools.items()
        }
        self.nodes_up: dict[Pool, list[int]] = {
            pool: sorted(self.nodes[i].node.gpus for i in idxs if self.nodes[i].node.accepts_work)
            for pool, idxs in self.pools.items()
        }
        """GPU counts of the ready nodes of each pool (the ones that could take a job now or when freed)."""
        self.pool_capacity: dict[Pool, int] = {}
        for pool, idxs in self.pools.items():
            self.pool_capacity[pool] = sum(self.nodes[i].node.gpus for i in idxs if self._usable(self.nodes[i]))
        self.quick_free: dict[str, int] = {}
        self.free_by_cluster: dict[str, int] = {}
        for job in snapshot.jobs:
            run = job.run
            if run is None:
                continue
            leaving = run.preemption is not None
            if leaving and run.preemption is not None:
                leave = run.preemption.kill_at
            elif run.in_slice(now) and run.slice_end is not None:
                leave = run.slice_end + grace_of(job, pol.max_grace)
            else:
                leave = now + grace_of(job, pol.max_grace)
            quick = is_quick(job, pol.headroom_max_grace, pol.max_grace) and not leaving
            for alloc in run.placement:
                at = self.index.get(alloc.node)
                if at is None:
                    continue
                slot = self.nodes[at]
                held = [g for g in alloc.gpus if g in slot.free]
                for g in held:
                    slot.free.remove(g)
                slot.occupants.append(
                    Occupant(job, len(alloc.gpus), max(leave, now), not leaving and not run.in_slice(now), leaving, at)
                )
                if quick and slot.accepts:
                    c = slot.node.cluster
                    self.quick_free[c] = self.quick_free.get(c, 0) + len(held)
        self.version = 0
        self._fit_cache: dict[tuple[int, int, tuple[Pool, ...]], tuple[int, bool]] = {}
        # best-fit buckets: pool → list indexed by free count → sorted node indices (accepting nodes only)
        self.buckets: dict[Pool, list[list[int]]] = {}
        for pool, idxs in self.pools.items():
            size = max(self.nodes[i].node.gpus for i in idxs)
            buckets: list[list[int]] = [[] for _ in range(size + 1)]
            for i in idxs:
                slot = self.nodes[i]
                if slot.accepts:
                    buckets[len(slot.free)].append(i)
                    c = slot.node.cluster
                    self.quick_free[c] = self.quick_free.get(c, 0) + len(slot.free)
                    self.free_by_cluster[c] = self.free_by_cluster.get(c, 0) + len(slot.free)
            self.buckets[pool] = buckets

    @staticmethod
    def _usable(slot: NodeSlot) -> bool:
        return slot.node.state.value in ("ready", "cordoned")

    # -- reading -----------------------------------------------------------------------------------------------
    def slot(self, name: str) -> NodeSlot | None:
        i = self.index.get(name)
        return None if i is None else self.nodes[i]

    def free_in_pools(self, pools: list[Pool]) -> int:
        return sum(len(self.nodes[i].free) for p in pools for i in self.pools.get(p, ()) if self.nodes[i].accepts)

    def max_free_in_pool(self, pool: Pool) -> int:
        buckets = self.buckets.get(pool)
        if not buckets:
            return 0
        for count in range(len(buckets) - 1, 0, -1):
            if buckets[count]:
                return count
        return 0

    def nodes_with_free(self, pool: Pool, at_least: int) -> list[int]:
        """Accepting nodes of the pool with at least `at_least` free GPUs, tightest fit first, then by index."""
        buckets = self.buckets.get(pool, [])
        out: list[int] = []
        for count in range(max(at_least, 0), len(buckets)):
            out.extend(buckets[count])
        return out

    def could_fit(self, gpus: int, replicas: int, pools: list[Pool]) -> bool:
        """An optimistic test (ignoring headroom, claims and funds): does some pool have a node with enough free
        GPUs, or enough wholly free nodes, for this gang? Cached until GPUs are taken."""
        key = (gpus, replicas, tuple(pools))
        hit = self._fit_cache.get(key)
        if hit is not None and hit[0] == self.version:
            return hit[1]
        total = gpus * replicas
        ok = False
        for pool in pools:
            size = self.node_size.get(pool, 0)
            if size <= 0 or gpus > size:
                continue
            if total <= size:
                ok = self.max_free_in_pool(pool) >= total
            else:
                per_node = size // gpus
                need = -(-replicas // per_node)
                ok = len(self.buckets[pool][size]) >= need
            if ok:
                break
        self._fit_cache[key] = (self.version, ok)
        return ok

    # -- changing ----------------------------------------------------------------------------------------------
    def take(self, idx: int, gpus: int, quick: bool) -> tuple[int, ...]:
        """Hand `gpus` free GPUs of node `idx` (lowest indices first) to a starting job."""
        slot = self.nodes[idx]
        assert len(slot.free) >= gpus, "take() beyond free GPUs"
        self.version += 1
        bucket = self.buckets[slot.pool]
        lst = bucket[len(slot.free)]
        del lst[bisect_left(lst, idx)]
        taken = tuple(slot.free[:gpus])
        del slot.free[:gpus]
        insort(bucket[len(slot.free)], idx)
        c = slot.node.cluster
        self.free_by_cluster[c] -= gpus
        if not quick:
            self.quick_free[c] -= gpus
        return taken
