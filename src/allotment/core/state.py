"""The per-cycle working state shared by the cycle's steps.

Owns: indices over the snapshot (budgets, leaves, jobs, node → pool), the fair-share tracker, GPUs held per budget
(for limits), money already promised to granted slices, session counts per user, the decisions accumulated so far,
and the small helpers every step needs (slice length, slice cost, rates, grace, taking GPUs for a start).

Must not: contain the ordering or preemption rules themselves (see cycle, steps and preemption).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeVar

from allotment.core.capacity import Capacity, NodeSlot, Occupant, Pool, grace_of, is_quick
from allotment.core.decisions import Blocker, Lapse, Preempt, PreemptReason, Renew, Reserve, Start, WaitReason
from allotment.core.fairshare import FairShare, credits_per_hour
from allotment.core.model import (
    FULL_PRICE,
    Allocation,
    Budget,
    ContractClass,
    Job,
    JobKind,
    Micro,
    Reservation,
    RunClass,
    Seconds,
    Snapshot,
)
from allotment.core.placement import Placement, pools_for
from allotment.core.ranking import Rankings
from allotment.core.reservations import earliest_on_node, everyone_yields, use_spare
from allotment.core.units import cost, mean_life
from allotment.core.victim_index import VictimIndex
from allotment.core.windows import WindowBook

_T = TypeVar("_T")


@dataclass(slots=True)
class Carried:
    """A reservation carried from the previous cycle that is still valid."""

    reservation: Reservation
    job: Job
    pool: Pool
    nodes: tuple[tuple[int, int], ...]
    yields: Callable[[Occupant], bool]
    """Which occupants give way to it (CycleState.yields_to for its job, as judged when it was carried)."""


_BY_ID = attrgetter("id")


def sort_by_budget_order(jobs: list[Job]) -> None:
    """Sort one budget's jobs in its own order: priority (highest first), then age, then id (decision 44).

    Rather than sorting on (-priority, submitted_at, id) tuples, which builds, compares and frees a tuple per job,
    each job's place becomes one integer, ((-priority) × span + submitted_at - lo) × n + position, where every
    submit time lies in [lo, lo + span) and position < n: a higher priority gives a key at least a whole span lower,
    so plain integers sort exactly as the tuples would, and the position comes back as key mod n. The rare runs of
    equal priority and age are then put in id order."""
    n = len(jobs)
    if n < 2:
        return
    lo = hi = jobs[0].submitted_at
    for job in jobs:
        at = job.submitted_at
        if at < lo:
            lo = at
        elif at > hi:
            hi = at
    span = hi - lo + 1
    keys = [(-job.priority * span + (job.submitted_at - lo)) * n + i for i, job in enumerate(jobs)]
    keys.sort()
    jobs[:] = [jobs[k % n] for k in keys]
    i = 0
    while i < n:
        first = jobs[i]
        k = i + 1
        while k < n and jobs[k].priority == first.priority and jobs[k].submitted_at == first.submitted_at:
            k += 1
        if k - i > 1:
            jobs[i:k] = sorted(jobs[i:k], key=_BY_ID)
        i = k


class CycleState:
    def __init__(self, snapshot: Snapshot, now: Seconds) -> None:
        self.snap = snapshot
        self.now = now
        self._interned: dict[object, object] = {}
        self.pol = snapshot.policy
        self.cap = Capacity(snapshot, now)
        self.topology = {c.name: c.topology for c in snapshot.clusters}
        self.budgets: dict[str, Budget] = {b.name: b for b in snapshot.budgets}
        parents = {b.parent for b in snapshot.budgets if b.parent is not None}
        self.leaves = {name for name in self.budgets if name not in parents}
        self.jobs: dict[str, Job] = {j.id: j for j in snapshot.jobs}
        self.node_pool: dict[str, Pool] = {s.node.name: s.pool for s in self.cap.nodes}
        self.windows = WindowBook(snapshot.windows, snapshot.jobs, self.cap.pool_capacity, self.node_pool, now)
        usage = {name: acc.usage for name, acc in snapshot.accounts.items()}
        self.fs = FairShare(snapshot.budgets, usage, mean_life(self.pol.usage_half_life) / 3600)
        self.occupants: dict[str, list[Occupant]] = {}
        for slot in self.cap.nodes:
            for occ in slot.occupants:
                self.occupants.setdefault(occ.job.id, []).append(occ)
        self.held: dict[str, int] = {}
        self.committed: dict[str, Micro] = {}
        self.sessions_of: dict[str, int] = {}
        held_rate: dict[str, int] = {}  # integer sums, so the order of jobs cannot change a standing
        for name in {job.budget for job in snapshot.jobs}:
            if name in self.budgets:
                self.fs.mark_active(name)
        for job in snapshot.jobs:
            run = job.run
            if run is None:
                continue
            gpus = run.gpu_count
            rate = self.rate_of_run(job)
            held_rate[job.budget] = held_rate.get(job.budget, 0) + gpus * rate
            for name in self.fs.ancestors(job.budget):
                self.held[name] = self.held.get(name, 0) + gpus
            if run.in_slice(now) and run.slice_end is not None and run.preemption is None:
                price = self.pol.session_price if job.kind is JobKind.SESSION else FULL_PRICE
                self.committed[job.budget] = self.committed.get(job.budget, 0) + cost(
                    gpus, rate, price, run.slice_end - now
                )
            if job.kind is JobKind.SESSION and run.preemption is None:
                self.sessions_of[job.user] = self.sessions_of.get(job.user, 0) + 1
        for budget in sorted(held_rate):
            self.fs.hold(budget, held_rate[budget] / 1_000_000)
        # decisions so far
        self.starts: list[Start] = []
        self.preempts: list[Preempt] = []
        self.renews: list[Renew] = []
        self.lapses: list[Lapse] = []
        self.reserves: list[Reserve] = []
        self.room_denied: set[str] = set()
        """Jobs that got no planned start because plans there already leave only the session room unclaimed."""
        self.wake_at: Seconds | None = None
        """Decisions.wake_at: the earliest instant a deferred call to leave falls due."""
        self.pending: dict[str, WaitReason] = {}
        self.started: set[str] = set()
        self.preempted: set[str] = set()
        self.reserved: set[str] = set()
        self.planned_budgets: set[str] = set()
        self.blockers: dict[str, Blocker] = {}
        self.backfill_of: dict[str, str] = {}
        self.started_terms: dict[str, tuple[Seconds | None, int, Micro]] = {}
        """Jobs started in this cycle: (slice end, GPUs held, rate of their pool)."""
        self.preempt_tried: set[str] = set()
        self.unchecked: set[str] = set()
        """Jobs passed over on the fast path (nothing could fit them): their funds and limits are checked only
        when their reason is explained."""
        self._limited: dict[str, tuple[tuple[str, int], ...]] = {}
        """Per budget: it and its ancestors that have a GPU limit, with the limit (within_limits)."""
        self.terms_of: dict[tuple[object, ...], Any] = {}
        """The cycle's one Terms object per value (funding._interned)."""
        self.shapes: dict[tuple[object, ...], Any] = {}
        """Per job shape: its usable pools and the terms found for it (funding.terms)."""
        self.shape_of: dict[str, Any] = {}
        """Per job id: its entry in `shapes`."""
        self.pool_costs: dict[tuple[object, ...], Any] = {}
        """Per pool and job size, kind and slice: GPUs held and the cost of a whole slice there (funding)."""
        self.window_verdicts: dict[tuple[object, ...], Any] = {}
        """Per pool with windows, owner, job size, kind, slice and slices granted on the pool (funding)."""
        self.rankings = Rankings(self.cap)
        """Per-pool node rankings kept for the cycle (victims for preemption, earliest possible starts for plans)."""
        # plain functions, not bound methods: the index must not refer back to the state (a reference cycle would
        # leave the whole cycle's state to Python's cyclic collector instead of freeing it when decide() returns)
        self.victims = VictimIndex(
            self.rankings,
            self.cap,
            now,
            _grace_rule(self.pol.max_grace),
            _quick_rule(self.pol.headroom_max_grace, self.pol.max_grace),
        )
        self.queues: dict[str, list[Job]] = {}
        """Pending batch jobs of each budget in the budget's own order: priority, then age, then id."""
        for job in snapshot.jobs:
            if job.run is None and job.kind is JobKind.BATCH:
                self.queues.setdefault(job.budget, []).append(job)
        for queue in self.queues.values():
            sort_by_budget_order(queue)
        self._pools: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[Pool, ...]] = {}
        self._pools_of: dict[str, tuple[Pool, ...]] = {}
        """Per job id: its entry in `_pools` (a lookup by the id's cached hash, not by a tuple of tuples)."""

    def release(self) -> None:
        """End of the cycle: drop what refers back to this state — rankings keep victim rules and claims keep
        `yields_to` rules, closures over it — so that everything the cycle built is freed by reference counting
        when decide() returns, not left in reference cycles for Python's cyclic collector. Nothing may use the
        state afterwards."""
        self.rankings.clear()
        for slot in self.cap.nodes:
            slot.claim = None

    def intern(self, value: _T) -> _T:
        """The cycle's canonical object equal to `value` (kept alive for the cycle, so its identity is a key)."""
        return self._interned.setdefault(value, value)  # type: ignore[return-value]

    # -- lookups -----------------------------------------------------------------------------------------------
    def pools(self, job: Job) -> tuple[Pool, ...]:
        """The pools the job allows, in its order of preference (interned: equal tuples are one object)."""
        mine = self._pools_of.get(job.id)
        if mine is not None:
            return mine
        key = (job.gpu_types, job.clusters)
        found = self._pools.get(key)
        if found is None:
            found = self.intern(tuple(pools_for(job, self.cap, self.snap.rates)))
            self._pools[key] = found
        self._pools_of[job.id] = found
        return found

    def earliest_bounds(self, pool: Pool, need: int, free_counts: bool) -> Iterable[tuple[int, Seconds]]:
        """reservations.Bounds: the pool's unclaimed nodes by the earliest time they could hold `need` GPUs if every
        occupant gave way."""
        now = self.now

        def value(slot: NodeSlot) -> Seconds | None:
            if not slot.accepts or slot.claim is not None or slot.node.gpus < need:
                return None
            return earliest_on_node(slot, need, now, everyone_yields, free_counts)

        return self.rankings.get(
            ("earliest", need, free_counts), pool, lambda: self.cap.pools.get(pool, ()), value, lambda t: t
        )

    def rate(self, pool: Pool) -> Micro:
        return self.snap.rates.get(pool[1], 0)

    def rate_of_run(self, job: Job) -> Micro:
        if job.run is None or not job.run.placement:
            return 0
        pool = self.node_pool.get(job.run.placement[0].node)
        return 0 if pool is None else self.rate(pool)

    def grace(self, job: Job) -> Seconds:
        return grace_of(job, self.pol.max_grace)

    def slice_length(self, job: Job) -> Seconds:
        if job.kind is JobKind.SESSION:
            return max(1, job.slice_seconds)
        return max(self.pol.min_slice, min(job.slice_seconds, self.pol.max_slice))

    def price(self, job: Job, run_class: RunClass) -> int:
        if run_class is RunClass.SESSION:
            return self.pol.session_price
        if run_class is RunClass.OPPORTUNISTIC:
            return self.pol.opportunistic_price
        return FULL_PRICE

    def available(self, budget: str) -> Micro:
        acc = self.snap.accounts.get(budget)
        balance = acc.balance if acc is not None else 0
        return balance - self.committed.get(budget, 0)

    def slice_cost(self, job: Job, gpus: int, pool: Pool, length: Seconds) -> Micro:
        run_class = RunClass.SESSION if job.kind is JobKind.SESSION else RunClass.GUARANTEED
        return cost(gpus, self.rate(pool), self.price(job, run_class), length)

    def within_limits(self, job: Job, gpus: int) -> str | None:
        """The name of the budget whose GPU limit this job would break, or None."""
        limited = self._limited.get(job.budget)
        if limited is None:
            limited = self._limited[job.budget] = tuple(
                (name, limit)
                for name in self.fs.ancestors(job.budget)
                if (limit := self.budgets[name].max_gpus) is not None
            )
        for name, limit in limited:
            if self.held.get(name, 0) + gpus > limit:
                return name
        return None

    def quick(self, job: Job) -> bool:
        """Would this job, once started, count as work that leaves within seconds (may sit in headroom)?"""
        return (
            job.contract is ContractClass.OPPORTUNISTIC
            and self.grace(job) <= self.pol.headroom_max_grace
            and job.kind is JobKind.BATCH
        )

    def quick_occupant(self, occ: Occupant) -> bool:
        """Is this running work fast-leaving (it may sit in session headroom)?"""
        return is_quick(occ.job, self.pol.headroom_max_grace, self.pol.max_grace)

    def headroom_ok(self, job: Job, quick: bool) -> bool:
        """Sessions and fast-leaving work may use headroom; everything else leaves it free."""
        return job.kind is JobKind.SESSION or quick

    def yields_to(self, holder: Job, also: str | None = None) -> Callable[[Occupant], bool]:
        """Which running work gives way to a planned start of `holder` (rule `planned-start`): opportunistic work
        always; another budget's slice work when handing its GPUs to the holder strictly lowers the larger of the two
        budgets' fair-share standings (so two budgets can never hand GPUs back and forth without one of them having
        gained usage), or when the holder has waited longer than `starvation_after`. A budget's own work never gives
        way to its own planned start. Work placed around the plan (backfill) always gives way to it."""
        return _GivesWay(self, holder, also)

    # -- acting ------------------------------------------------------------------------------------------------
    def start(self, job: Job, placement: Placement, run_class: RunClass, slice_end: Seconds | None, rule: str) -> None:
        quick = run_class is RunClass.OPPORTUNISTIC and self.quick(job)
        allocs: list[Allocation] = []
        backfill_for: str | None = None
        for idx, gpus in placement.nodes:
            slot = self.cap.nodes[idx]
            if slot.claim is not None and slot.claim.job_id != job.id:
                backfill_for = slot.claim.job_id
            use_spare(slot, gpus, slice_end, self.grace(job))
            allocs.append(Allocation(slot.node.name, self.cap.take(idx, gpus, quick)))
            # a job started in this cycle is not preempted in the same cycle; it leaves at its slice end at the earliest
            leave = (slice_end if slice_end is not None else self.now) + self.grace(job)
            occ = Occupant(job, gpus, leave, preemptible=False, leaving=False, node=idx, quick=quick)
            self.cap.add_occupant(occ)
            self.occupants.setdefault(job.id, []).append(occ)
        held = placement.gpus
        self.starts.append(Start(job.id, tuple(allocs), run_class, slice_end, rule, backfill_for))
        if backfill_for is not None:
            self.backfill_of[job.id] = backfill_for
        self.started_terms[job.id] = (slice_end, placement.gpus, self.rate(placement.pool))
        self.started.add(job.id)
        self.fs.hold(job.budget, credits_per_hour(held, self.rate(placement.pool)))
        for name in self.fs.ancestors(job.budget):
            self.held[name] = self.held.get(name, 0) + held
        if slice_end is not None:
            self.committed[job.budget] = self.committed.get(job.budget, 0) + cost(
                held, self.rate(placement.pool), self.price(job, run_class), slice_end - self.now
            )
            self.windows.commit(job.budget, placement.pool, held, slice_end)
        if job.kind is JobKind.SESSION:
            self.sessions_of[job.user] = self.sessions_of.get(job.user, 0) + 1

    def preempt(self, occ_job: Job, reason: PreemptReason, preemptor: str | None, requeue: bool | None = None) -> None:
        if occ_job.id in self.preempted:
            return
        grace = 0 if reason is PreemptReason.NODE_DOWN else self.grace(occ_job)
        again = occ_job.requeue if requeue is None else requeue
        self.preempts.append(Preempt(occ_job.id, reason, grace, again, preemptor))
        self.preempted.add(occ_job.id)
        for occ in self.occupants.get(occ_job.id, ()):
            self.cap.update_occupant(occ, leaving=True, preemptible=False, leave=self.now + grace)


def _grace_rule(max_grace: Seconds) -> Callable[[Job], Seconds]:
    def grace(job: Job) -> Seconds:
        return grace_of(job, max_grace)

    return grace


def _quick_rule(headroom_max_grace: Seconds, max_grace: Seconds) -> Callable[[Occupant], bool]:
    def quick(occ: Occupant) -> bool:
        return is_quick(occ.job, headroom_max_grace, max_grace)

    return quick


class _GivesWay:
    """CycleState.yields_to's rule for one holder (a class rather than a closure: a compiled closure that keeps
    state forms a reference cycle with its environment, which only Python's cyclic collector frees)."""

    def __init__(self, st: CycleState, holder: Job, also: str | None) -> None:
        self.st = st
        self.holder = holder
        self.also = also
        self.starving = st.now - holder.submitted_at >= st.pol.starvation_after
        rate = min((st.rate(p) for p in st.pools(holder)), default=0)
        self.gain = credits_per_hour(holder.total_gpus, rate)
        self.before = st.fs.standing(holder.budget)
        self.verdicts: dict[tuple[str, int], bool] = {}

    def __call__(self, occ: Occupant) -> bool:
        st, holder = self.st, self.holder
        job = occ.job
        placed_under = job.run.backfill_for if job.run is not None else st.backfill_of.get(job.id)
        if placed_under is not None and placed_under in (holder.id, self.also):
            return True
        if job.budget == holder.budget:
            return False
        # work started earlier in this cycle is judged like running work (next cycle it will be running)
        slice_end, held, rate_held = (
            (job.run.slice_end, job.run.gpu_count, st.rate_of_run(job))
            if job.run is not None
            else st.started_terms[job.id]
        )
        if slice_end is None or self.starving:
            return True
        key = (job.budget, held)
        verdicts = self.verdicts
        if key not in verdicts:
            loss = credits_per_hour(held, rate_held)
            g_after, l_after = st.fs.standings_after_swap(holder.budget, self.gain, job.budget, loss)
            verdicts[key] = max(g_after, l_after) < max(self.before, st.fs.standing(job.budget))
        return verdicts[key]
