"""A Kueue-like baseline: nominal quotas per budget, borrowing within one cohort, and fair sharing by dominant
resource share with preemption of borrowed workloads (docs/baselines.md, "kueue").

Owns:
- quotas: every leaf budget is a ClusterQueue; its nominal quota of each pool (Kueue's resource flavor) is its
  allocation share of the pool's usable GPUs, by largest remainder so the quotas add up to the pool; all queues
  form one cohort and may borrow any unused quota (no borrowing or lending limits);
- the dominant resource share (DRS) of a queue: the largest, over pools, of the GPUs it uses above its nominal
  quota over the pool's lendable GPUs (the sum of the cohort's nominal quotas), × 1000 (all weights 1);
- admission (BestEffortFIFO queues, fair sharing on): the queue heads are taken one at a time, the queue whose DRS
  with its head admitted is lowest first (ties by name); each queue's jobs by priority, then age. A head that fits
  in free GPUs is admitted (placement: the core's consolidated placement);
- preemption: a head that does not fit may preempt, in its own queue, work of lower priority, and, in other queues,
  work of queues that borrow when the preemption strategies allow it — LessThanOrEqualToFinalShare (the
  preemptor's DRS with the job ≤ the target's DRS without the victim), then LessThanInitialShare (< the target's DRS
  before); victims from the most-borrowing queue first, then lowest priority, then most recently started
  (`Reclaim`, which also names the queues whose work can be a victim at all, so the search asks about no other);
- drains: a node drain evicts every workload on it (kubectl drain), with its grace; idle sessions are never
  reclaimed.

Must not: read a clock, do I/O or draw random numbers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from allotment.core.capacity import Pool
from allotment.core.decisions import Blocker, Decisions, PreemptReason
from allotment.core.model import Job, Seconds, Snapshot
from allotment.core.placement import Placement
from allotment.policies.common import Frame, drain_all, end_of_life, pending_jobs, static_shares
from allotment.policies.preempting import Lookout, NoRoom, carry_rooms, find_room, ready_at, take_room


def nominal_quotas(
    leaves: list[str], shares: dict[str, float], capacity: dict[Pool, int]
) -> dict[str, dict[Pool, int]]:
    """Each leaf's nominal quota of each pool: its share of the pool, by largest remainder (ties by name)."""
    total_share = sum(shares.get(leaf, 0.0) for leaf in leaves)
    out: dict[str, dict[Pool, int]] = {leaf: {} for leaf in leaves}
    for pool in sorted(capacity):
        gpus = capacity[pool]
        exact = {leaf: gpus * shares.get(leaf, 0.0) / total_share if total_share > 0 else 0.0 for leaf in leaves}
        floors = {leaf: int(v) for leaf, v in exact.items()}
        left = gpus - sum(floors.values()) if total_share > 0 else 0
        for leaf in sorted(leaves, key=lambda x: (-(exact[x] - floors[x]), x))[:left]:
            floors[leaf] += 1
        for leaf in leaves:
            out[leaf][pool] = floors[leaf]
    return out


class Quotas:
    """Usage against nominal quotas, and dominant resource shares, as the cycle changes them."""

    def __init__(self, frame: Frame, snapshot: Snapshot) -> None:
        st = frame.st
        self.leaves = sorted(st.ix.leaves)
        self.capacity = dict(frame.cap.pool_capacity)
        self.nominal = nominal_quotas(self.leaves, static_shares(snapshot.budgets), self.capacity)
        self.usage: dict[str, dict[Pool, int]] = {}
        self._drs: dict[str, dict[tuple[Pool | None, int], float]] = {}
        """Queue → (pool, delta) → its DRS so (a queue's entries are dropped when its usage changes)."""
        self._borrowers: dict[Pool, list[str]] = {}
        self.touched: set[str] = set()
        """Queues whose usage changed since the admission loop last looked (`Heads.refresh`)."""
        self.pool_of: dict[str, Pool] = {}
        for job in snapshot.jobs:
            run = job.run
            if run is None or not run.placement:
                continue
            pool = st.ix.node_pool.get(run.placement[0].node)
            if pool is None:
                continue
            self.pool_of[job.id] = pool
            self.add(job.budget, pool, run.gpu_count)

    def add(self, queue: str, pool: Pool, gpus: int) -> None:
        self._drs.pop(queue, None)
        self._borrowers.pop(pool, None)
        self.touched.add(queue)
        per = self.usage.setdefault(queue, {})
        per[pool] = per.get(pool, 0) + gpus

    def borrows(self, queue: str, pool: Pool) -> bool:
        """Does the queue use more of the pool than its nominal quota?"""
        return self.usage.get(queue, {}).get(pool, 0) > self.nominal.get(queue, {}).get(pool, 0)

    def borrowers(self, pool: Pool) -> list[str]:
        """The queues that borrow in the pool (cached until usage in the pool changes)."""
        found = self._borrowers.get(pool)
        if found is None:
            found = self._borrowers[pool] = [q for q in self.usage if self.borrows(q, pool)]
        return found

    def drs(self, queue: str, pool: Pool | None = None, delta: int = 0) -> float:
        """The queue's dominant resource share, with `delta` GPUs more (or fewer) in `pool` (cached until the queue's
        usage changes)."""
        per = self._drs.get(queue)
        if per is None:
            per = self._drs[queue] = {}
        key = (pool, delta)
        found = per.get(key)
        if found is None:
            found = per[key] = self._compute(queue, pool, delta)
        return found

    def _compute(self, queue: str, pool: Pool | None, delta: int) -> float:
        best = 0.0
        used = self.usage.get(queue, {})
        nominal = self.nominal.get(queue, {})
        for p in set(used) | ({pool} if pool is not None else set()):
            lendable = self.capacity.get(p, 0)
            if lendable <= 0:
                continue
            borrowed = used.get(p, 0) + (delta if p == pool else 0) - nominal.get(p, 0)
            best = max(best, max(0, borrowed) * 1000 / lendable)
        return best


class Reclaim:
    """Which running work a pending job may preempt, and in what order (Kueue's preemption within the cohort and
    within its own queue), against the quotas as they stand while its room is searched."""

    def __init__(self, quotas: Quotas, job: Job) -> None:
        self.quotas = quotas
        self.job = job
        self._verdicts: dict[str, tuple[bool, float, float] | None] = {}

    def target(self, v: Job) -> tuple[bool, float, float] | None:
        """(final-share strategy holds, target DRS before, after) for a victim; None if not a victim."""
        if v.id not in self._verdicts:
            self._verdicts[v.id] = self._judge(v)
        return self._verdicts[v.id]

    def _judge(self, v: Job) -> tuple[bool, float, float] | None:
        quotas, job = self.quotas, self.job
        pool = quotas.pool_of.get(v.id)
        if pool is None or v.run is None:
            return None
        if v.budget == job.budget:
            # lower-priority work of its own queue, so that the queue fits its nominal quota with the job
            if v.priority < job.priority and quotas.drs(job.budget, pool, job.total_gpus - v.run.gpu_count) == 0:
                return (True, 0.0, 0.0)
            return None
        if not quotas.borrows(v.budget, pool):
            return None  # only work of queues that borrow in this pool gives way to another queue
        mine = quotas.drs(job.budget, pool, job.total_gpus)
        before = quotas.drs(v.budget)
        after = quotas.drs(v.budget, pool, -v.run.gpu_count)
        if mine <= after:
            return (True, before, after)
        if mine < before:
            return (False, before, after)
        return None

    def eligible(self, v: Job) -> bool:
        return self.target(v) is not None

    def suspects(self, pool: Pool) -> frozenset[str]:
        """The queues whose work in `pool` can be a victim at all: the job's own, and those that borrow there with
        a share at least the job's queue's with the job (a victim needs `mine <= after` or `mine < before`, and a
        victim leaving never raises its queue's share: after <= before). A victim's pool is its nodes' pool."""
        quotas, job = self.quotas, self.job
        mine = quotas.drs(job.budget, pool, job.total_gpus)
        return frozenset({job.budget, *(q for q in quotas.borrowers(pool) if mine <= quotas.drs(q))})

    def order(self, v: Job) -> tuple[object, ...]:
        """Victims from the most-borrowing queue first (final-share ones before), then lowest priority, then most
        recently started."""
        t = self.target(v)
        assert t is not None
        started = v.run.started_at if v.run is not None else 0
        return (not t[0], -t[1], v.priority, -started, v.id)


class Heads:
    """The queue heads in admission order: the queue whose DRS with its head admitted is lowest first (ties by
    name). A heap of (DRS, queue, stamp): a queue's entry is pushed again whenever its head moves or its usage
    changes (a DRS falls when its work is told to leave, so an old entry could come up too late), and an entry
    older than its queue's last push is dropped when it comes up — the order of taking the minimum afresh each
    time, in O(log queues) a head instead of O(queues)."""

    def __init__(self, frame: Frame, quotas: Quotas, queues: dict[str, list[Job]]) -> None:
        self.frame = frame
        self.quotas = quotas
        self.queues = queues
        self.next = dict.fromkeys(queues, 0)
        self.stamp = dict.fromkeys(queues, 0)
        self.heap: list[tuple[float, str, int]] = []
        quotas.touched.clear()
        for name in queues:
            self._push(name)

    def _push(self, name: str) -> None:
        stamp = self.stamp[name] = self.stamp[name] + 1
        at = self.next[name]
        if at < len(self.queues[name]):
            job = self.queues[name][at]
            pools = self.frame.pools(job)
            drs = self.quotas.drs(name, pools[0] if pools else None, job.total_gpus)
            heapq.heappush(self.heap, (drs, name, stamp))

    def pop(self) -> Job | None:
        """The next head to admit (its queue moves on to its next job), or None when every queue is done."""
        while self.heap:
            _, name, stamp = heapq.heappop(self.heap)
            if stamp == self.stamp[name]:
                at = self.next[name]
                self.next[name] = at + 1
                return self.queues[name][at]
        return None

    def refresh(self, queue: str) -> None:
        """After `queue`'s head was handled: push it again, and every queue whose usage changed meanwhile."""
        touched = self.quotas.touched | {queue}
        self.quotas.touched = set()
        for name in sorted(touched):
            if name in self.queues:
                self._push(name)


class KueueFairSharing:
    name = "kueue"

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        frame = Frame(snapshot, now)
        end_of_life(frame)
        drain_all(frame, lambda _job: True)
        quotas = Quotas(frame, snapshot)
        promised: dict[int, int] = {}

        def admit(job: Job, placement: Placement) -> None:
            frame.start(job, placement, "kueue-admit")
            quotas.add(job.budget, placement.pool, placement.gpus)

        carried = carry_rooms(frame, promised, admit)
        for jid, room in carried.items():
            if jid not in frame.st.out.started:  # still waiting for its victims: its quota stays reserved
                quotas.add(frame.st.ix.jobs[jid].budget, room.pool, sum(g for _, g in room.nodes))
        queues: dict[str, list[Job]] = {}
        for job in pending_jobs(snapshot):
            if job.id in carried:
                continue
            queues.setdefault(job.budget, []).append(job)
        for q in queues.values():
            q.sort(key=lambda j: (-j.priority, j.submitted_at, j.id))
        no_room = NoRoom(frame)
        lookout = Lookout(frame)
        heads = Heads(frame, quotas, queues)
        while (head := heads.pop()) is not None:
            self._admit(frame, quotas, head, promised, (no_room, lookout), admit)
            heads.refresh(head.budget)
        return frame.decisions()

    def _admit(
        self,
        frame: Frame,
        quotas: Quotas,
        job: Job,
        promised: dict[int, int],
        memo: tuple[NoRoom, Lookout],
        admit: Callable[[Job, Placement], None],
    ) -> None:
        placement = frame.place_now(job)
        if placement is not None:
            admit(job, placement)
            return
        if not frame.can_ever_run(job):
            return
        reclaim = Reclaim(quotas, job)
        shape = (job.budget, frame.pools(job), job.gpus, job.replicas)
        room = None
        no_room, lookout = memo
        if not no_room.known(shape, job.priority):
            room = find_room(frame, job, reclaim.eligible, reclaim.order, promised, reclaim.suspects, lookout)
        if room is None:
            no_room.record(shape, job.priority)
            frame.wait(
                job,
                Blocker.CAPACITY,
                f"needs {job.total_gpus} GPUs; no free room and no borrowed work its queue may reclaim "
                f"(queue {job.budget} share {quotas.drs(job.budget):.0f})",
            )
            return
        take_room(frame, job, room, PreemptReason.FAIR_SHARE, promised)
        for v in room.victims:
            if v.run is not None and v.id in quotas.pool_of:
                quotas.add(v.budget, quotas.pool_of[v.id], -v.run.gpu_count)
        quotas.add(job.budget, room.pool, sum(g for _, g in room.nodes))
        names = ", ".join(frame.cap.nodes[i].node.name for i, _ in room.nodes)
        frame.wait(
            job,
            Blocker.WAITING_FOR_GRACE,
            f"waits on {names} for work leaving for it ({len(room.victims)} borrowed or lower-priority workloads "
            "told to leave in this cycle)",
            ready_at(frame, room),
        )
