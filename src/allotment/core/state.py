"""The cycle's working state: its parts, named, and the few acts and lookups that span them.

Owns: CycleState, which holds the cycle's parts — `ix` (read-only indices over the snapshot, indices.py), `cap`
(the fleet's GPUs, capacity.py), `fs` (fair share, fairshare.py), `windows` (capacity windows, windows.py), `out`
(the decisions so far and their tallies, outcome.py), `caches` (caches.py), `rankings` and `victims` (per-pool
node rankings, ranking.py and victim_index.py) — each changed only through its own methods; and what needs more
than one part: a job's pools, GPU limits, earliest bounds for plans, the `planned-start` yield rule, starting a job
(capacity, fair share, windows and outcome together) and releasing the cycle. Carried reservations are typed here.

Must not: contain the ordering or preemption rules themselves (see cycle, steps and preemption).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from allotment.core.caches import CycleCaches, Pools
from allotment.core.capacity import Capacity, NodeSlot, Occupant, Pool, grace_of
from allotment.core.decisions import PreemptReason, Start
from allotment.core.fairshare import FairShare, credits_per_hour
from allotment.core.indices import Indices
from allotment.core.model import (
    FULL_PRICE,
    Allocation,
    Job,
    JobKind,
    Micro,
    Reservation,
    RunClass,
    Seconds,
    Snapshot,
)
from allotment.core.outcome import Outcome
from allotment.core.placement import Placement, pools_for
from allotment.core.ranking import Rankings
from allotment.core.reservations import earliest_on_node, everyone_yields, use_spare
from allotment.core.units import cost, mean_life
from allotment.core.victim_index import VictimIndex
from allotment.core.windows import WindowBook


@dataclass(slots=True)
class Carried:
    """A reservation carried from the previous cycle that is still valid."""

    reservation: Reservation
    job: Job
    pool: Pool
    nodes: tuple[tuple[int, int], ...]
    yields: Callable[[Occupant], bool]
    """Which occupants give way to it (CycleState.yields_to for its job, as judged when it was carried)."""


class CycleState:
    """One cycle's parts (see the module docstring); every attribute is Final: the parts change, never which."""

    __slots__ = ("caches", "cap", "entitled", "fs", "ix", "kept", "out", "rankings", "victims", "windows")

    def __init__(self, snapshot: Snapshot, now: Seconds) -> None:
        pol = snapshot.policy
        cap = Capacity(snapshot, now)
        ix = Indices(snapshot, now, cap)
        self.cap: Final = cap
        self.ix: Final = ix
        self.caches: Final = CycleCaches()
        self.windows: Final = WindowBook(snapshot.windows, snapshot.jobs, cap.pool_capacity, ix.node_pool, now)
        usage = {name: acc.usage for name, acc in snapshot.accounts.items()}
        fs = FairShare(snapshot.budgets, usage, mean_life(pol.usage_half_life) / 3600)
        self.fs: Final = fs
        out = Outcome()
        self.out: Final = out
        held_rate: dict[str, int] = {}  # integer sums, so the order of jobs cannot change a standing
        for name in {job.budget for job in snapshot.jobs}:
            if name in ix.budgets:
                fs.mark_active(name)
        for job in snapshot.jobs:
            run = job.run
            if run is None:
                continue
            gpus = run.gpu_count
            rate = ix.rate_of_run(job)
            held_rate[job.budget] = held_rate.get(job.budget, 0) + gpus * rate
            out.hold(fs.ancestors(job.budget), gpus)
            if run.in_slice(now) and run.slice_end is not None and run.preemption is None:
                price = pol.session_price if job.kind is JobKind.SESSION else FULL_PRICE
                out.commit(job.budget, cost(gpus, rate, price, run.slice_end - now))
            if job.kind is JobKind.SESSION and run.preemption is None:
                out.open_session(job.user)
        for budget in sorted(held_rate):
            fs.hold(budget, held_rate[budget] / 1_000_000)
        self.entitled: Final = entitled_budgets(snapshot, fs, ix.leaves)
        """Rule `opportunistic-entitlement`: the budgets whose opportunistic work is served in the cycle's first pass
        while they stay below their share (see entitled_budgets)."""
        self.kept: Final = kept_opportunistic(snapshot, fs, ix.leaves)
        """Rule `opportunistic-entitlement`: the budgets whose running opportunistic work guaranteed work may not take
        by preemption (see kept_opportunistic)."""
        self.rankings: Final = Rankings(cap)
        """Per-pool node rankings kept for the cycle (victims for preemption, earliest possible starts for plans)."""
        # plain functions, not bound methods: the index must not refer back to the state (core performance rules, 2)
        self.victims: Final = VictimIndex(
            self.rankings,
            cap,
            now,
            _grace_rule(pol.max_grace),
        )

    def release(self) -> None:
        """End of the cycle: drop what refers back to this state — rankings keep victim rules and claims keep
        `yields_to` rules — so that reference counting frees everything the cycle built (core performance rules, 3).
        Nothing may use the state afterwards."""
        self.rankings.clear()
        for slot in self.cap.nodes:
            slot.claim = None

    # -- lookups -----------------------------------------------------------------------------------------------
    def pools(self, job: Job) -> Pools:
        """The pools the job allows, in its order of preference (interned: equal tuples are one object)."""
        caches = self.caches
        mine = caches.pools_of.get(job.id)
        if mine is not None:
            return mine
        key = (job.gpu_types, job.clusters)
        found = caches.pools_by_key.get(key)
        if found is None:
            found = caches.intern_pools(tuple(pools_for(job, self.cap, self.ix.rates)))
            caches.pools_by_key[key] = found
        caches.pools_of[job.id] = found
        return found

    def earliest_bounds(self, pool: Pool, need: int, free_counts: bool) -> Iterable[tuple[int, Seconds]]:
        """reservations.Bounds: the pool's unclaimed nodes by the earliest time they could hold `need` GPUs if every
        occupant gave way."""
        now = self.ix.now

        def value(slot: NodeSlot) -> Seconds | None:
            if not slot.accepts or slot.claim is not None or slot.node.gpus < need:
                return None
            return earliest_on_node(slot, need, now, everyone_yields, None if free_counts else 0)

        return self.rankings.get(
            ("earliest", need, free_counts), pool, lambda: self.cap.pools.get(pool, ()), value, lambda t: t
        )

    def available(self, budget: str) -> Micro:
        return self.out.available(self.ix, budget)

    def within_limits(self, job: Job, gpus: int) -> str | None:
        """The name of the budget whose GPU limit this job would break, or None."""
        limits = self.caches.limits
        limited = limits.get(job.budget)
        if limited is None:
            budgets = self.ix.budgets
            limited = limits[job.budget] = tuple(
                (name, limit) for name in self.fs.ancestors(job.budget) if (limit := budgets[name].max_gpus) is not None
            )
        held = self.out.held
        for name, limit in limited:
            if held.get(name, 0) + gpus > limit:
                return name
        return None

    def yields_to(self, holder: Job, also: str | None = None, *, planned: bool) -> Callable[[Occupant], bool]:
        """Which running work gives way to a planned start of `holder` (rule `planned-start`): opportunistic work
        always — its own budget's too when the start is `planned` (a plan tells its victims to leave in time; GPUs
        being freed by preemption count only the victims already told); another budget's slice work when handing
        its GPUs to the holder strictly lowers the larger of the two budgets' fair-share standings (so two budgets
        can never hand GPUs back and forth without one of them having gained usage), or when the holder has waited
        longer than `starvation_after`. A budget's own slice work never gives way to its own planned start. Work
        placed around the plan (backfill) always gives way to it."""
        return _GivesWay(self, holder, also, planned)

    # -- acting ------------------------------------------------------------------------------------------------
    def start(self, job: Job, placement: Placement, run_class: RunClass, slice_end: Seconds | None, rule: str) -> None:
        """Start the job on `placement`: its GPUs are taken in `cap`, its budget holds them in `fs`, its slice
        counts in `windows`, and `out` records the start with its GPUs, money and session."""
        ix, cap = self.ix, self.cap
        quick = run_class is RunClass.OPPORTUNISTIC and ix.quick(job)
        grace = ix.grace(job)
        # a job started in this cycle is not preempted in the same cycle; it leaves at its slice end at the earliest
        leave = (slice_end if slice_end is not None else ix.now) + grace
        allocs: list[Allocation] = []
        backfill_for: str | None = None
        for idx, gpus in placement.nodes:
            slot = cap.nodes[idx]
            if slot.claim is not None and slot.claim.job_id != job.id:
                backfill_for = slot.claim.job_id
            use_spare(slot, gpus, slice_end, grace)
            occ = Occupant(job, gpus, leave, preemptible=False, leaving=False, node=idx, quick=quick)
            allocs.append(Allocation(slot.node.name, cap.take(idx, gpus, quick, occ.cpus, occ.memory)))
            cap.add_occupant(occ)
        held = placement.gpus
        rate = ix.rate(placement.pool)
        out = self.out
        out.mark_started(
            Start(job.id, tuple(allocs), run_class, slice_end, rule, backfill_for), (slice_end, held, rate)
        )
        self.fs.hold(job.budget, credits_per_hour(held, rate))
        promised = None
        if slice_end is not None:
            promised = cost(held, rate, ix.price(job, run_class), slice_end - ix.now)
            self.windows.commit(job.budget, placement.pool, held, slice_end)
        out.admit(job, self.fs.ancestors(job.budget), held, promised, job.kind is JobKind.SESSION)

    def preempt(self, job: Job, reason: PreemptReason, preemptor: str | None, requeue: bool | None = None) -> None:
        """Outcome.preempt on this cycle's indices and capacity."""
        self.out.preempt(self.ix, self.cap, job, reason, preemptor, requeue)


def entitled_budgets(snapshot: Snapshot, fs: FairShare, leaves: Iterable[str]) -> frozenset[str]:
    """Rule `opportunistic-entitlement` (decision 68): the leaf budgets with credits left below their fair share as
    the cycle starts. Opportunistic work changes a job's guarantee and price, not its budget's
    share: up to the share, such a budget's opportunistic jobs are served in fair-share order beside guaranteed work
    (pending.fair_share_order), and its running opportunistic work is kept from preemption by guaranteed work while
    the budget is not above its share (kept_opportunistic). Plans still count it as leaving and take it at their
    planned start (promise 8), as do sessions, capacity windows and the session room."""
    return frozenset(
        b
        for b in leaves
        if b in snapshot.accounts and snapshot.accounts[b].balance > 0 and fs.standing(b) < 1.0 - SHARE_SLACK
    )


def kept_opportunistic(snapshot: Snapshot, fs: FairShare, leaves: Iterable[str]) -> frozenset[str]:
    """Rule `opportunistic-entitlement`: the leaf budgets with credits left that are not above their fair share as
    the cycle starts (SHARE_SLACK absorbs rounding at exactly the share). Their running opportunistic work is kept
    from guaranteed work, as slice-expired work of a budget below its share is (`expired_yields_to_under_share`);
    a budget above its share has it taken as before. Judged once per cycle, so the victim rule looks at the occupant
    alone."""
    return frozenset(
        b
        for b in leaves
        if b in snapshot.accounts and snapshot.accounts[b].balance > 0 and fs.standing(b) <= 1.0 + SHARE_SLACK
    )


SHARE_SLACK = 1e-9
"""Standings within this of 1.0 count as at the share: two budgets holding exactly their shares compute standings a
rounding error apart, and a rule that compared them strictly would take one's work and then the other's."""


def _grace_rule(max_grace: Seconds) -> Callable[[Job], Seconds]:
    def grace(job: Job) -> Seconds:
        return grace_of(job, max_grace)

    return grace


class _GivesWay:
    """CycleState.yields_to's rule for one holder (a class, not a closure: core performance rules, 2)."""

    def __init__(self, st: CycleState, holder: Job, also: str | None, planned: bool) -> None:
        self.st = st
        self.holder = holder
        self.also = also
        self.planned = planned
        self.starving = st.ix.now - holder.submitted_at >= st.ix.pol.starvation_after
        rate = min((st.ix.rate(p) for p in st.pools(holder)), default=0)
        self.gain = credits_per_hour(holder.total_gpus, rate)
        self.before = st.fs.standing(holder.budget)
        self.verdicts: dict[tuple[str, int], bool] = {}

    def __call__(self, occ: Occupant) -> bool:
        st, holder = self.st, self.holder
        job = occ.job
        placed_under = job.run.backfill_for if job.run is not None else st.out.backfill_of.get(job.id)
        if placed_under is not None and placed_under in (holder.id, self.also):
            return True
        # work started earlier in this cycle is judged like running work (next cycle it will be running)
        slice_end, held, rate_held = (
            (job.run.slice_end, job.run.gpu_count, st.ix.rate_of_run(job))
            if job.run is not None
            else st.out.started_terms[job.id]
        )
        own = job.budget == holder.budget
        if slice_end is None:
            # opportunistic work, even kept (`opportunistic-entitlement`), leaves for a plan: promise 8; the holder's
            # own budget's too, or a gang of the whole cluster could never plan past its own budget's work
            return self.planned or not own
        if own:
            return False
        if self.starving:
            return True
        key = (job.budget, held)
        verdicts = self.verdicts
        if key not in verdicts:
            loss = credits_per_hour(held, rate_held)
            g_after, l_after = st.fs.standings_after_swap(holder.budget, self.gain, job.budget, loss)
            verdicts[key] = max(g_after, l_after) < max(self.before, st.fs.standing(job.budget))
        return verdicts[key]
