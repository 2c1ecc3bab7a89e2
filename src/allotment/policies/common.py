"""What every baseline policy shares: the per-cycle frame around the core's CycleState, and the rules the baselines
have in common (docs/baselines.md, "Common rules").

Owns:
- `Frame`: the core's CycleState (capacity, placement, starts, preemptions, budget tree) plus the baselines' own
  facts: each running job's known end (its kill deadline, its time limit or its session length, never a slice),
  the node-ownership rule (`budget` node labels) and the pending reasons collected so far;
- `end_of_life`: what ends work in every baseline (lost nodes and forced drains, refunded; time limits; session
  length). Idle sessions are *not* reclaimed: no baseline scheduler knew about idleness;
- run classes for baseline starts (batch work gets no slice; a session holds its requested length);
- pending reasons in numbers, drain estimates, and assembling the Decisions.

Must not: order jobs or choose victims (each policy module does), read a clock, do I/O or draw random numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from allotment.core.cancellation import cancellations
from allotment.core.capacity import NodeSlot, Pool
from allotment.core.decisions import Blocker, Decisions, PreemptReason, WaitReason
from allotment.core.model import Budget, Job, JobKind, NodeState, RunClass, Seconds, Snapshot
from allotment.core.placement import Placement, find_free, node_size, nodes_needed
from allotment.core.state import CycleState

OWNER_LABEL = "budget"
"""A node carrying the label `budget=<name>` belongs to that budget's subtree: only jobs of that budget or its
descendants may run there (a virtual cluster's own nodes). Unlabelled nodes are shared by everyone."""


def known_duration(job: Job) -> Seconds | None:
    """How long the job may run once started, as a baseline scheduler knows it: its time limit (max runtime) and,
    for a session, its requested length. None when nothing bounds it."""
    limits = [job.max_runtime] if job.max_runtime is not None else []
    if job.kind is JobKind.SESSION:
        limits.append(max(1, job.slice_seconds))
    return min(limits) if limits else None


class Frame:
    """One cycle of a baseline policy: the core's working state plus the baselines' view of when work ends."""

    def __init__(self, snapshot: Snapshot, now: Seconds) -> None:
        self.st = CycleState(snapshot, now)
        self.snap = snapshot
        self.now = now
        self.cap = self.st.cap
        self.reasons: dict[str, WaitReason] = {}
        self.owner_of: dict[int, str] = {
            slot.idx: label for slot in self.cap.nodes if (label := slot.node.label(OWNER_LABEL)) is not None
        }
        self.owners = set(self.owner_of.values())
        self._access: dict[str, frozenset[str] | None] = {}
        self._ever: dict[tuple[object, ...], bool] = {}
        self._usable: dict[tuple[Pool, int, frozenset[str] | None], list[int]] = {}
        self._free: dict[tuple[object, ...], tuple[int, int]] = {}
        self.held_free: dict[int, int] = {}
        """Node index → free GPUs held this cycle for a job that waits for its victims to leave (nobody else takes
        them in this cycle)."""
        self.ends: dict[str, Seconds | None] = {}
        """Running job → when its GPUs are free at the latest, as far as the scheduler knows (None: unknown)."""
        for job in snapshot.jobs:
            if job.run is not None:
                self.ends[job.id] = self._end_of_running(job)

    # -- facts ---------------------------------------------------------------------------------------------------
    def _end_of_running(self, job: Job) -> Seconds | None:
        run = job.run
        assert run is not None
        if run.preemption is not None:
            return run.preemption.kill_at
        ends: list[Seconds] = []
        grace = self.st.ix.grace(job)
        if job.max_runtime is not None:
            ends.append(run.started_at + job.max_runtime + grace)
        if job.kind is JobKind.SESSION and run.slice_end is not None:
            ends.append(run.slice_end + grace)
        return max(self.now, min(ends)) if ends else None

    def end_if_started(self, job: Job) -> Seconds | None:
        """When a job started now would free its GPUs at the latest (None: unbounded)."""
        d = known_duration(job)
        return None if d is None else self.now + d + self.st.ix.grace(job)

    def access(self, job: Job) -> frozenset[str] | None:
        """The owner labels whose nodes the job may use besides unlabelled ones (None: the fleet has no labels)."""
        if not self.owners:
            return None
        found = self._access.get(job.budget)
        if found is None:
            found = self._access[job.budget] = frozenset(self.owners.intersection(self.st.fs.ancestors(job.budget)))
        return found

    def allowed(self, job: Job, slot: NodeSlot) -> bool:
        """The node-ownership rule: a labelled node takes only its budget subtree's jobs."""
        owner = self.owner_of.get(slot.idx)
        if owner is None:
            return True
        access = self.access(job)
        return access is not None and owner in access

    def partition(self, job: Job) -> str | None:
        """The nearest budget (the job's own or an ancestor) that owns labelled nodes: the job's queue partition."""
        for name in self.st.fs.ancestors(job.budget):
            if name in self.owners:
                return name
        return None

    def pools(self, job: Job) -> tuple[Pool, ...]:
        return self.st.pools(job)

    def can_ever_run(self, job: Job) -> bool:
        """Some ready node of an allowed pool, that the job may use, is large enough for one replica (and whole
        nodes for a multi-node gang)."""
        pools = self.pools(job)
        key = (self.access(job), pools, job.gpus, job.replicas)
        found = self._ever.get(key)
        if found is None:
            found = self._ever[key] = self._can_ever_run(job, pools)
        return found

    def _can_ever_run(self, job: Job, pools: tuple[Pool, ...]) -> bool:
        for pool in pools:
            size = node_size(self.cap, pool)
            k = nodes_needed(job, size)
            if k == 0:
                continue
            need = job.total_gpus if k == 1 else size
            if len(self.usable(job, pool, need)) >= k:
                return True
        return False

    def usable(self, job: Job, pool: Pool, need: int) -> list[int]:
        """The pool's nodes, in order, that accept work, have at least `need` GPUs and that the job may use (none of
        which changes within a cycle, so it is asked once per pool, size and node access)."""
        key = (pool, need, self.access(job))
        found = self._usable.get(key)
        if found is None:
            nodes = self.cap.nodes
            found = self._usable[key] = [
                i
                for i in self.cap.pools[pool]
                if nodes[i].accepts and nodes[i].node.gpus >= need and self.allowed(job, nodes[i])
            ]
        return found

    def free_for(self, job: Job) -> int:
        """Free GPUs in the job's pools on nodes it may use (cached until GPUs are taken)."""
        pools = self.pools(job)
        key = (self.access(job), pools)
        found = self._free.get(key)
        if found is not None and found[0] == self.cap.version:
            return found[1]
        free = sum(
            len(self.cap.nodes[i].free)
            for pool in pools
            for i in self.cap.pools.get(pool, ())
            if self.cap.nodes[i].accepts and self.allowed(job, self.cap.nodes[i])
        )
        self._free[key] = (self.cap.version, free)
        return free

    # -- acting --------------------------------------------------------------------------------------------------
    def place_now(self, job: Job, node_ok: Callable[[NodeSlot, int], bool] | None = None) -> Placement | None:
        """The core's gang placement (best fit, whole nodes for multi-node gangs, tightest topology) in free GPUs of
        nodes the job may use (and that `node_ok` accepts)."""

        pools = self.pools(job)
        if not self.cap.could_fit(job.gpus, job.replicas, pools):
            return None

        def ok(slot: NodeSlot, need: int) -> bool:
            return (
                self.allowed(job, slot)
                and len(slot.free) - self.held_free.get(slot.idx, 0) >= need
                and (node_ok is None or node_ok(slot, need))
            )

        return find_free(job, pools, self.cap, ok, lambda _c, _n: True, self.st.ix.topology)

    def start(self, job: Job, placement: Placement, rule: str, run_class: RunClass | None = None) -> None:
        """Start a job: batch work runs without a slice (charged at full price), a session holds its requested
        length (its time limit), unless the policy names another run class."""
        session = job.kind is JobKind.SESSION
        if run_class is None:
            run_class = RunClass.SESSION if session else RunClass.GUARANTEED
        slice_end = self.now + max(1, job.slice_seconds) if session else None
        self.st.start(job, placement, run_class, slice_end, rule)
        if job.id in self.st.out.started:
            self.ends[job.id] = self.end_if_started(job)

    def wait(
        self, job: Job, blocker: Blocker, message: str, estimated: Seconds | None = None, free: int | None = None
    ) -> None:
        self.reasons[job.id] = WaitReason(
            blocker, message, job.total_gpus, self.free_for(job) if free is None else free, estimated
        )

    def decisions(self) -> Decisions:
        """Assemble the cycle's decisions; every pending job not started has a reason."""
        st = self.st
        pending: dict[str, WaitReason] = {}
        for job in self.snap.jobs:
            if job.run is None and job.id not in st.out.started:
                found = self.reasons.get(job.id)
                pending[job.id] = found if found is not None else self._default_reason(job)
        return Decisions(
            starts=tuple(st.out.starts),
            preempts=tuple(st.out.preempts),
            reserves=tuple(st.out.reserves),
            pending=pending,
            drain_estimates=self._drain_estimates(),
        )

    def _default_reason(self, job: Job) -> WaitReason:
        if not self.can_ever_run(job):
            return WaitReason(
                Blocker.NO_POOL,
                "no ready node it may use, of an allowed GPU type and cluster, can hold it",
                job.total_gpus,
                self.free_for(job),
                None,
            )
        return WaitReason(
            Blocker.CAPACITY,
            f"needs {job.total_gpus} GPUs; not enough are free on nodes it may use",
            job.total_gpus,
            self.free_for(job),
            None,
        )

    def _drain_estimates(self) -> dict[str, Seconds]:
        """Draining nodes whose work all has a known end: when the last of it leaves."""
        out: dict[str, Seconds] = {}
        for slot in self.cap.nodes:
            if slot.node.state is not NodeState.DRAINING:
                continue
            ends = [self.ends.get(o.job.id) for o in slot.occupants]
            if all(e is not None for e in ends):
                out[slot.node.name] = max((e for e in ends if e is not None), default=self.now)
        return out


def end_of_life(frame: Frame) -> None:
    """Lost nodes and forced drains end work (refunded); time limits and session lengths end it (not requeued);
    then work whose owner cancelled it leaves (core/cancellation.py, not requeued).
    Sessions are never reclaimed for being idle: the baselines' schedulers had no such notion."""
    st = frame.st
    now = frame.now
    for job in frame.snap.jobs:
        run = job.run
        if run is None or run.preemption is not None:
            continue
        slots = [s for a in run.placement if (s := frame.cap.slot(a.node)) is not None]
        if len(slots) < len(run.placement) or any(s.node.state is NodeState.DOWN for s in slots):
            st.preempt(job, PreemptReason.NODE_DOWN, None)
        elif any(s.node.state is NodeState.DRAINING and s.node.forced for s in slots):
            st.preempt(job, PreemptReason.FORCED, None)
        elif job.max_runtime is not None and now - run.started_at >= job.max_runtime:
            st.preempt(job, PreemptReason.MAX_RUNTIME, None, requeue=False)
        elif job.kind is JobKind.SESSION and run.slice_end is not None and now >= run.slice_end:
            st.preempt(job, PreemptReason.SESSION_END, None, requeue=False)
        else:
            continue
        frame.ends[job.id] = frame.now + (
            0 if st.out.preempts[-1].reason is PreemptReason.NODE_DOWN else st.ix.grace(job)
        )
    cancellations(st.ix, st.cap, st.out)  # the same rule as the allotment policy's (cancelled, or requeued)
    for p in st.out.preempts:
        if p.reason in (PreemptReason.CANCELLED, PreemptReason.REQUEUED):
            frame.ends[p.job_id] = frame.now + p.grace


def drain_all(frame: Frame, leaves: Callable[[Job], bool]) -> None:
    """On draining nodes, the running work that `leaves` selects is told to leave now (reason `drain`)."""
    for slot in frame.cap.nodes:
        if slot.node.state is not NodeState.DRAINING:
            continue
        for occ in list(slot.occupants):
            job = occ.job
            if (
                job.run is not None
                and job.run.preemption is None
                and job.id not in frame.st.out.preempted
                and leaves(job)
            ):
                frame.st.preempt(job, PreemptReason.DRAIN, None)
                frame.ends[job.id] = frame.now + frame.st.ix.grace(job)


def static_shares(budgets: Iterable[Budget]) -> dict[str, float]:
    """Each budget's fraction of the fleet by allocation along the tree, over all budgets (active or not):
    the product, from the root down, of its allocation over the sum of its siblings' allocations."""
    blist = list(budgets)
    by_name = {b.name: b for b in blist}
    sums: dict[str | None, float] = {}
    for b in blist:
        parent = b.parent if b.parent in by_name else None
        sums[parent] = sums.get(parent, 0.0) + max(b.allocation, 0)
    out: dict[str, float] = {}
    for b in blist:
        frac = 1.0
        node: Budget | None = b
        while node is not None:
            parent = node.parent if node.parent in by_name else None
            total = sums.get(parent, 0.0)
            frac *= max(node.allocation, 0) / total if total > 0 else 0.0
            node = by_name.get(parent) if parent is not None else None
        out[b.name] = frac
    return out


def pending_jobs(snapshot: Snapshot) -> Iterable[Job]:
    return (j for j in snapshot.jobs if j.run is None)
