"""The cycle's working picture of the fleet: which GPUs are free, who holds the rest, and what is promised.

Owns: per-node free GPU indices and free CPUs and memory (decision 60), the running jobs on each node and when each
could leave, per-pool best-fit buckets,
per-node "reach" (GPUs free, leaving or held by preemptible work: the most a preemption could ever free there) with
per-pool buckets of it, per-node change counters (so per-cycle caches know when a node changed), per-cluster
quick-free counts (for session headroom), the room node of each cluster (where a whole-node session would start),
and per-node reservation claims.
It changes only as the cycle decides (GPUs taken by starts, claimed by reservations, occupants told to leave or
renewed, all through the methods below); preempted GPUs are not free until the executor reports the victim gone, so
nothing here frees GPUs.

Must not: decide anything. The rules live in placement, preemption, reservations and cycle.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence

from allotment.core.model import ContractClass, Job, Node, NodeState, Seconds, Snapshot

Pool = tuple[str, str]
"""(cluster, gpu_type)"""

UNCOUNTED = 1 << 60
"""The free CPUs or memory of a node that declares none: more than any request (at most 2^56 MiB: config.limits),
so nothing is counted there, and small enough to stay a machine integer in the compiled core."""


def replicas_on(per_replica: int, gpus: int) -> int:
    """Replicas of a job of `per_replica` GPUs each on a node where it holds `gpus` GPUs: a single-node gang all of
    them, a node of a multi-node gang as many as fit the GPUs it holds there (rule `cpus-and-memory-beside-gpus`)."""
    return gpus // per_replica if per_replica > 0 else 0


class Claim:
    """A reservation's hold on one node: `gpus` GPUs from `planned_start` on.

    Claim, Occupant and NodeSlot are plain classes that compare by identity (core performance rules, 1)."""

    __slots__ = ("gpus", "job_id", "planned_start", "spare", "yields")

    def __init__(
        self, job_id: str, gpus: int, planned_start: Seconds, spare: int, yields: Callable[[Occupant], bool]
    ) -> None:
        self.job_id = job_id
        self.gpus = gpus
        self.planned_start = planned_start
        self.spare = spare
        """GPUs of this node that others may still hold past planned_start without delaying it."""
        self.yields = yields
        """Which running work on the node gives way to the holder (is not renewed in its way, may be preempted for
        it)."""


class Occupant:
    """A running job's hold on one node, as the cycle sees it."""

    __slots__ = ("cpus", "gpus", "job", "leave", "leaving", "memory", "node", "preemptible", "quick")

    def __init__(
        self,
        job: Job,
        gpus: int,
        leave: Seconds,
        preemptible: bool,
        leaving: bool,
        node: int,
        quick: bool = False,
    ) -> None:
        self.job = job
        self.gpus = gpus
        r = gpus // job.gpus if job.gpus > 0 else 0  # replicas_on, inline: built for every running job each cycle
        self.cpus = r * job.cpus
        """CPUs it holds on this node (its replicas there × its request)."""
        self.memory = r * job.memory
        """MiB of memory it holds on this node."""
        self.leave = leave
        """The earliest time its GPUs on this node could be free: kill deadline if preempting, slice end + grace if
        inside its slice, now + grace otherwise."""
        self.preemptible = preemptible
        """Not inside a run slice and not already leaving."""
        self.leaving = leaving
        self.node = node
        """Index of the node slot it sits on."""
        self.quick = quick
        """Fast-leaving work (opportunistic, short grace, not leaving): its GPUs count as session headroom."""


class NodeSlot:
    """One node as the cycle sees it: its free GPU indices, its occupants and the claim on it."""

    __slots__ = (
        "_by_leave",
        "accepts",
        "claim",
        "cpus_free",
        "expired",
        "free",
        "idx",
        "memory_free",
        "node",
        "occupants",
        "pool",
        "reach",
        "version",
    )

    def __init__(self, idx: int, node: Node, pool: Pool, free: list[int]) -> None:
        self.idx = idx
        self.node = node
        self.pool = pool
        self.free = free
        self.occupants: list[Occupant] = []
        self.claim: Claim | None = None
        self.accepts = node.accepts_work
        self.cpus_free = node.cpus if node.cpus > 0 else UNCOUNTED
        """CPUs not held by its occupants (UNCOUNTED where the node declares none; below 0 if it declares fewer than
        its running work holds)."""
        self.memory_free = node.memory if node.memory > 0 else UNCOUNTED
        """MiB of memory not held by its occupants (UNCOUNTED where the node declares none)."""
        self.reach = 0
        """Free GPUs plus the GPUs of occupants that are leaving or preemptible: no preemption can free more
        here."""
        self.expired = 0
        """GPUs of its preemptible slice-expired work."""
        self.version = 0
        """Counts changes to `free` and `occupants` (not to `claim`), for per-cycle caches of per-node results."""
        self._by_leave: tuple[int, list[Occupant]] = (-1, [])

    def by_leave(self) -> list[Occupant]:
        """The occupants in order of when they could leave (stable), kept until the node changes."""
        if self._by_leave[0] != self.version:
            self._by_leave = (self.version, sorted(self.occupants, key=lambda o: o.leave))
        return self._by_leave[1]


def _reachable(occ: Occupant) -> int:
    return occ.gpus if occ.leaving or occ.preemptible else 0


def _expired(occ: Occupant) -> int:
    """GPUs of preemptible slice-expired work (preemptible work that held a slice)."""
    run = occ.job.run
    return occ.gpus if occ.preemptible and run is not None and run.slice_end is not None else 0


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
        self.unclaimed: dict[str, int] = {}
        """Per cluster, the GPUs of accepting nodes that no reservation claims (rule `plans-leave-session-room`)."""
        self.claimed_nodes: dict[str, int] = {}
        """Per cluster, how many accepting nodes a reservation claims."""
        self.claimed_room: dict[str, int] = {}
        """Per cluster, the free and fast-leaving GPUs on accepting nodes a reservation claims: they belong to its plan,
        not to the session room (see room())."""
        for slot in self.nodes:
            if slot.accepts:
                c = slot.node.cluster
                self.unclaimed[c] = self.unclaimed.get(c, 0) + slot.node.gpus
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
                occ = Occupant(
                    job, len(alloc.gpus), max(leave, now), not leaving and not run.in_slice(now), leaving, at, quick
                )
                slot.occupants.append(occ)
                slot.cpus_free -= occ.cpus
                slot.memory_free -= occ.memory
                if quick and slot.accepts:
                    c = slot.node.cluster
                    self.quick_free[c] = self.quick_free.get(c, 0) + len(held)
        self._up_with: dict[tuple[Pool, int], int] = {}
        self.version = 0
        self._fit_cache: dict[tuple[int, int, int], tuple[int, bool, Sequence[Pool]]] = {}
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
            self.buckets[pool] = buckets
        self._top_free: dict[Pool, int] = {pool: self._scan_top(pool) for pool in self.buckets}
        # reach buckets: pool → list indexed by reach (capped at the pool's node size) → accepting node indices
        self.reach_buckets: dict[Pool, list[set[int]]] = {}
        self.expired_nodes: dict[Pool, set[int]] = {}
        """Accepting nodes holding preemptible slice-expired work, per pool."""
        self.changes: dict[Pool, list[int]] = {pool: [] for pool in self.pools}
        """Per pool, the nodes whose free GPUs, occupants or claim changed in this cycle, in order (repeats allowed)."""
        for pool, idxs in self.pools.items():
            reach: list[set[int]] = [set() for _ in range(self.node_size[pool] + 1)]
            expired: set[int] = set()
            for i in idxs:
                slot = self.nodes[i]
                slot.reach = len(slot.free) + sum(_reachable(o) for o in slot.occupants)
                slot.expired = sum(_expired(o) for o in slot.occupants)
                if slot.accepts:
                    reach[min(slot.reach, len(reach) - 1)].add(i)
                    if slot.expired:
                        expired.add(i)
            self.reach_buckets[pool] = reach
            self.expired_nodes[pool] = expired
        self.cluster_nodes: dict[str, list[NodeSlot]] = {}
        """Per cluster, its accepting nodes in index order (for the node-shaped room)."""
        for slot in self.nodes:
            if slot.accepts:
                self.cluster_nodes.setdefault(slot.node.cluster, []).append(slot)
        self.stamp = 0
        """Counts every change of free GPUs, occupants or claims (keys room_node's cache)."""
        self._room_node: dict[str, tuple[int, int, NodeSlot | None]] = {}
        self.occupants_of: dict[str, list[Occupant]] = {}
        """Per job id: its occupants, in node order, then in the order they were added."""
        for slot in self.nodes:
            for occ in slot.occupants:
                self.occupants_of.setdefault(occ.job.id, []).append(occ)

    @staticmethod
    def _usable(slot: NodeSlot) -> bool:
        state = slot.node.state
        return state is NodeState.READY or state is NodeState.CORDONED  # not `.value`: interpreted in enum.py

    # -- reading -----------------------------------------------------------------------------------------------
    def slot(self, name: str) -> NodeSlot | None:
        i = self.index.get(name)
        return None if i is None else self.nodes[i]

    def up_nodes_with(self, pool: Pool, gpus: int) -> int:
        """How many ready nodes of the pool have at least `gpus` GPUs."""
        key = (pool, gpus)
        found = self._up_with.get(key)
        if found is None:
            found = self._up_with[key] = sum(1 for g in self.nodes_up.get(pool, ()) if g >= gpus)
        return found

    def free_in_pools(self, pools: Sequence[Pool]) -> int:
        return sum(len(self.nodes[i].free) for p in pools for i in self.pools.get(p, ()) if self.nodes[i].accepts)

    def max_free_in_pool(self, pool: Pool) -> int:
        """The most free GPUs any accepting node of the pool has."""
        return self._top_free.get(pool, 0)

    def _scan_top(self, pool: Pool) -> int:
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

    def nodes_with_reach(self, pool: Pool, at_least: int) -> list[int]:
        """Accepting nodes of the pool whose reach is at least `at_least`, in no particular order: the only nodes
        where a preemption could free that many GPUs (victim rules never offer work inside its slice)."""
        out: list[int] = []
        for bucket in self.reach_buckets.get(pool, [])[max(at_least, 0) :]:
            out.extend(bucket)
        return out

    def could_fit(self, gpus: int, replicas: int, pools: Sequence[Pool]) -> bool:
        """An optimistic test (ignoring headroom, claims and funds): does some pool have a node with enough free
        GPUs, or enough wholly free nodes, for this gang? Cached until GPUs are taken."""
        key = (gpus, replicas, id(pools))
        hit = self._fit_cache.get(key)
        if hit is not None and hit[0] == self.version and hit[2] is pools:
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
        self._fit_cache[key] = (self.version, ok, pools)
        return ok

    # -- changing ----------------------------------------------------------------------------------------------
    def take(self, idx: int, gpus: int, quick: bool, cpus: int = 0, memory: int = 0) -> tuple[int, ...]:
        """Hand `gpus` free GPUs of node `idx` (lowest indices first), and `cpus` CPUs and `memory` MiB beside them,
        to a starting job."""
        slot = self.nodes[idx]
        assert len(slot.free) >= gpus, "take() beyond free GPUs"
        slot.cpus_free -= cpus
        slot.memory_free -= memory
        self.version += 1
        bucket = self.buckets[slot.pool]
        lst = bucket[len(slot.free)]
        del lst[bisect_left(lst, idx)]
        taken = tuple(slot.free[:gpus])
        del slot.free[:gpus]
        insort(bucket[len(slot.free)], idx)
        if not lst and self._top_free[slot.pool] == len(slot.free) + gpus:
            self._top_free[slot.pool] = self._scan_top(slot.pool)
        self._changed(slot, -gpus, 0)
        c = slot.node.cluster
        if not quick:
            self.quick_free[c] -= gpus
            if slot.claim is not None:
                self.claimed_room[c] -= gpus
        return taken

    def room_deficit(self, cluster: str, want: int) -> int:
        """How many GPUs the cluster's session room lacks, counting GPUs already leaving unclaimed nodes as back."""
        if want <= 0:
            return 0
        coming = sum(
            o.gpus
            for s in self.nodes
            if s.node.cluster == cluster and s.accepts and s.claim is None
            for o in s.occupants
            if o.leaving
        )
        return want - self.room(cluster) - coming

    def room(self, cluster: str) -> int:
        """Rule `session-room`: the cluster's GPUs a session could have within seconds — free or held by
        fast-leaving work, on accepting nodes no reservation claims."""
        return self.quick_free.get(cluster, 0) - self.claimed_room.get(cluster, 0)

    @staticmethod
    def room_on(slot: NodeSlot) -> int:
        """The node's part of its cluster's session room while no reservation claims it — its free GPUs and those of
        fast-leaving work — which is what a claim on it takes from the room, whatever GPUs the claim itself needs."""
        return len(slot.free) + sum(o.gpus for o in slot.occupants if o.quick)

    @staticmethod
    def soon(slot: NodeSlot) -> int:
        """The node's GPUs a session could have within seconds or once work already told to leave is gone: free, or
        held by fast-leaving or leaving work."""
        return len(slot.free) + sum(o.gpus for o in slot.occupants if o.quick or o.leaving)

    def room_node(self, cluster: str, whole: int) -> NodeSlot | None:
        """Rule `node-shaped-room`: the node of the cluster's room that a `whole`-GPU session would start on — an
        accepting, unclaimed node of at least `whole` GPUs: one with `whole` GPUs free or leaving soon if there is
        one, else the one nearest to it (preemption alone could free it, then the most GPUs soon), then the lowest
        index. None where no such node exists. Cached until capacity changes."""
        hit = self._room_node.get(cluster)
        if hit is not None and hit[0] == self.stamp and hit[1] == whole:
            return hit[2]
        best: NodeSlot | None = None
        best_key = (-1, False, -1)
        for slot in self.cluster_nodes.get(cluster, ()):
            if slot.claim is not None or slot.node.gpus < whole:
                continue
            soon = self.soon(slot)
            key = (min(soon, whole), slot.reach >= whole, soon)
            if key > best_key:
                best, best_key = slot, key
        self._room_node[cluster] = (self.stamp, whole, best)
        return best

    def set_claim(self, idx: int, claim: Claim | None) -> None:
        """Hold a node for a reservation, or release it."""
        self.stamp += 1
        slot = self.nodes[idx]
        if slot.accepts and (slot.claim is None) != (claim is None):
            c = slot.node.cluster
            sign = 1 if claim is None else -1
            self.unclaimed[c] += sign * slot.node.gpus
            self.claimed_nodes[c] = self.claimed_nodes.get(c, 0) - sign
            self.claimed_room[c] = self.claimed_room.get(c, 0) - sign * self.room_on(slot)
        slot.claim = claim
        self.changes[slot.pool].append(idx)

    def add_occupant(self, occ: Occupant) -> None:
        """A job starting in this cycle now holds GPUs of node `occ.node` (taken with take())."""
        slot = self.nodes[occ.node]
        slot.occupants.append(occ)
        self.occupants_of.setdefault(occ.job.id, []).append(occ)
        self._changed(slot, _reachable(occ), _expired(occ))

    def update_occupant(self, occ: Occupant, *, leaving: bool, preemptible: bool, leave: Seconds) -> None:
        """An occupant was told to leave, or renewed: its new state and the earliest time its GPUs could be free."""
        slot = self.nodes[occ.node]
        reach, expired = _reachable(occ), _expired(occ)
        occ.leaving, occ.preemptible, occ.leave = leaving, preemptible, leave
        self._changed(slot, _reachable(occ) - reach, _expired(occ) - expired)

    def _changed(self, slot: NodeSlot, reach_delta: int, expired_delta: int) -> None:
        """Record a change of a node's free GPUs or occupants (every such change goes through here)."""
        slot.version += 1
        self.stamp += 1
        self.changes[slot.pool].append(slot.idx)
        reach = slot.reach + reach_delta
        if slot.accepts:
            buckets = self.reach_buckets[slot.pool]
            top = len(buckets) - 1
            old, new = min(slot.reach, top), min(reach, top)
            if old != new:
                buckets[old].discard(slot.idx)
                buckets[new].add(slot.idx)
            if expired_delta and slot.expired + expired_delta > 0:
                self.expired_nodes[slot.pool].add(slot.idx)
            elif expired_delta:
                self.expired_nodes[slot.pool].discard(slot.idx)
        slot.reach = reach
        slot.expired += expired_delta
