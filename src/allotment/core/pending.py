"""Cycle steps over pending work, in the order the policy serves it.

Owns the rules
- `reserved-first`: jobs holding a reservation start on their reserved GPUs as soon as those are free;
- `sessions-first`: sessions within the session limits go before all batch work and may take opportunistic or
  slice-expired work (promise 9);
- `window-claims`: during a capacity window its budget's jobs come next on the window's pool, up to the window size;
- `fair-share-order`: then budgets in hierarchical fair-share order (fairshare.py), and inside one budget its jobs by
  priority, then age — so a priority set on budget A can only reorder A's own jobs (promise 3); a job that fits in
  free GPUs starts (promise 5); a guaranteed job may take opportunistic work, and slice-expired work when its budget
  is below its fair share; a budget's first funded job that still waits gets a planned start (promise 8);
- `headroom-refill`: session headroom is refilled by preempting opportunistic or slice-expired work, and (rule
  `node-shaped-room`) the room node is emptied of it where a whole-node session would not fit there.

Must not: preempt work inside its slice (the victim rules in preemption.py never offer it).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from allotment.core.admission import (
    final_slice_end,
    headroom_filter,
    place_by_preemption,
    place_free,
    room_exempt,
    start_free,
)
from allotment.core.caches import Terms
from allotment.core.capacity import Capacity, Occupant, Pool
from allotment.core.decisions import Blocker, PreemptReason, Reserve
from allotment.core.fairshare import credits_per_hour
from allotment.core.funding import never_fits, terms
from allotment.core.indices import Indices, sort_by_budget_order
from allotment.core.model import ContractClass, Job, JobKind, ReservationKind, RunClass, Seconds
from allotment.core.outcome import Outcome
from allotment.core.placement import Placement, asks_beside, node_size, nodes_needed
from allotment.core.preemption import (
    expired_yields_to_under_share,
    lost_work,
    opportunistic_yields,
    session_takes,
    victim_reason,
    window_reclaims,
)
from allotment.core.reservations import Yields, claim, plan_start, planned_on, room_denied
from allotment.core.running import due_victims, reservation_reserve
from allotment.core.state import SHARE_SLACK, Carried, CycleState


def reserved_first(st: CycleState, carried: list[Carried]) -> None:
    """Reads the carried reservations, their jobs' terms and limits; writes starts (CycleState.start), calls to
    leave, claims (`st.cap`), reservations and blockers (`st.out`)."""
    for c in carried:
        job = c.job
        for idx, _ in c.nodes:
            st.cap.set_claim(idx, None)
        t = terms(st, job)
        if t.blocker is not None:
            st.out.block(job.id, t.blocker)
            continue
        if c.pool not in t.pools:
            continue  # its plan no longer fits its terms: the reservation lapses and it is served like any other job
        if st.within_limits(job, sum(g for _, g in c.nodes)) is not None:
            st.out.block(job.id, Blocker.LIMIT)
            continue
        if all(len(st.cap.nodes[i].free) >= g for i, g in c.nodes):
            placement = Placement(c.pool, c.nodes)
            st.start(job, placement, t.run_class, final_slice_end(st, job, t, placement), "reservation")
            continue
        elsewhere = place_free(st, job, t)
        if elsewhere is not None:  # it fits now somewhere else: no reason to wait for the plan
            start_free(st, job, t, elsewhere, "fair-share")
            continue
        planned = claim_and_call_due(st, job, c.nodes, c.yields, promised=c.reservation.planned_start)
        reservation_reserve(st, c, planned)
        if c.reservation.kind is ReservationKind.PLANNED:
            st.out.plan_for(job.budget)


def claim_and_call_due(
    st: CycleState,
    job: Job,
    nodes: tuple[tuple[int, int], ...],
    yields: Yields,
    planned: Seconds | None = None,
    promised: Seconds | None = None,
) -> Seconds:
    """Claim a reservation's nodes (for `planned`, by default the earliest its nodes could hold it, never later than
    `promised` for a wait on checkpoints: reservations.planned_on) and tell the preemptible work there that is due to
    leave (its notice would end at the planned start or later) to go now, so the GPUs are free when the plan starts;
    returns the planned start."""
    beside = job if asks_beside(job) else None
    if planned is None:
        planned = planned_on(st.cap, nodes, st.ix.now, yields, _wait(st), st.ix.grace, beside, promised)
    claim(st.cap, job.id, nodes, planned, yields)
    due = [occ for idx, need in nodes for occ in due_victims(st, st.cap.nodes[idx], need, planned)]
    if not due:
        return planned
    for occ in due:
        st.preempt(occ.job, PreemptReason.RESERVATION, job.id)
    again = planned_on(st.cap, nodes, st.ix.now, yields, _wait(st), st.ix.grace, beside, promised or planned)
    planned = max(planned, again)
    claim(st.cap, job.id, nodes, planned, yields)
    return planned


def sessions_first(st: CycleState) -> None:
    """Reads the pending sessions, the session limits and their terms; writes starts (CycleState.start),
    preemptions with their reservations (admission.place_by_preemption) and blockers (`st.out`)."""
    pol = st.ix.pol
    pending = sorted(
        (j for j in st.ix.snap.jobs if j.run is None and j.kind is JobKind.SESSION and st.out.is_open(j.id)),
        key=lambda j: (j.submitted_at, j.id),
    )
    preempt_failed: set[SessionKey] = set()

    def takes(occ: Occupant) -> PreemptReason | None:
        return session_takes(occ, st.ix.now)

    for job in pending:
        if job.total_gpus > pol.session_max_gpus or job.slice_seconds > pol.session_max_length:
            st.out.block(job.id, Blocker.SESSION_LIMIT)
            continue
        if st.out.sessions_of.get(job.user, 0) >= pol.session_max_per_user:
            st.out.block(job.id, Blocker.SESSION_LIMIT)
            continue
        if st.within_limits(job, job.total_gpus) is not None:
            st.out.block(job.id, Blocker.LIMIT)
            continue
        t = terms(st, job)
        if t.blocker is not None:
            st.out.block(job.id, t.blocker)
            continue
        placement = place_free(st, job, t)
        if placement is not None:
            start_free(st, job, t, placement, "session")
            continue
        key = (job.total_gpus, id(t.pools), st.ix.grace(job), job.cpus, job.memory)  # terms() interns its tuples
        if key in preempt_failed or not place_by_preemption(st, job, t, takes, indexed=(("session",), takes, True)):
            preempt_failed.add(key)
            st.out.block(job.id, Blocker.CAPACITY)


def window_claims(st: CycleState) -> None:
    """Reads the open windows and their budgets' queues; writes starts (CycleState.start) and preemptions with
    their reservations (admission.place_by_preemption)."""
    for w in st.windows.active_windows():
        pool = (w.cluster, w.gpu_type)
        held = 0  # the window budget's GPUs on the pool, including work started earlier in this cycle
        for idx in st.cap.pools.get(pool, ()):
            for occ in st.cap.nodes[idx].occupants:
                if occ.job.budget == w.budget and not occ.leaving:
                    held += occ.gpus
        preempt_failed: set[WindowJobKey] = set()
        for job in st.ix.queues.get(w.budget, ()):
            if held >= w.gpus:
                break
            if not st.out.is_open(job.id):
                continue
            t = terms(st, job)  # the owner's own windows never constrain it; other budgets' windows still do
            if t.blocker is not None or pool not in t.pools or t.run_class is RunClass.OPPORTUNISTIC:
                continue
            need = job.total_gpus
            if held + need > w.gpus or st.within_limits(job, need) is not None:
                continue
            pinned = Terms(t.run_class, (pool,), (t.slice_end(pool),), None)
            placement = place_free(st, job, pinned)
            if placement is not None:
                start_free(st, job, pinned, placement, "capacity-window")
                held += placement.gpus
                continue
            key = (job.gpus, job.replicas, st.ix.grace(job), job.cpus, job.memory)
            if key in preempt_failed:
                continue
            reclaim = _reclaim_for(w.budget)
            if place_by_preemption(st, job, pinned, reclaim, indexed=(("window", w.budget), reclaim, True)):
                held += need
            else:
                preempt_failed.add(key)


def _reclaim_for(owner: str) -> Callable[[Occupant], PreemptReason | None]:
    def rule(occ: Occupant) -> PreemptReason | None:
        return window_reclaims(occ, owner)

    return rule


def fair_share_order(st: CycleState) -> None:
    """Serve guaranteed work first, then opportunistic work on what is left (it runs on idle capacity), each pass
    in hierarchical fair-share order of budgets and each budget's own order of jobs. A budget below its share has
    its opportunistic work served in the first pass too, until it reaches its share (`opportunistic-entitlement`).

    Reads the budget queues, fair share, terms (through `st.caches`) and the victim index; writes starts
    (CycleState.start), preemptions with their reservations (admission.place_by_preemption), planned starts with
    their claims, and what it learns about waiting jobs (`st.out`'s mark methods)."""
    guaranteed: dict[str, list[Job]] = {}
    opportunistic: dict[str, list[Job]] = {}
    for budget, queue in st.ix.queues.items():
        if budget not in st.ix.leaves:
            for job in queue:
                st.out.block(job.id, Blocker.FUNDS)
            continue
        # rule `opportunistic-entitlement`: a budget below its share has all its work served in the first pass, in
        # its own order; what turns out to run opportunistically once it reaches its share is left for the second
        entitled = budget in st.entitled
        for job in queue:
            if st.out.is_open(job.id):
                side = opportunistic if job.contract is ContractClass.OPPORTUNISTIC and not entitled else guaranteed
                side.setdefault(budget, []).append(job)
    deferred = _serve(st, guaranteed, opportunistic_pass=False)
    for budget, jobs in deferred.items():
        merged = [*opportunistic.get(budget, []), *jobs]
        sort_by_budget_order(merged)
        opportunistic[budget] = merged
    _serve(st, opportunistic, opportunistic_pass=True)


def gang_backfill_on_claimed_nodes(st: CycleState) -> None:
    """Rule `gang-backfill-on-claimed-nodes`: once guaranteed and opportunistic work have been served, a guaranteed
    gang of several nodes still waiting for capacity may start on nodes plans claim, where it cannot delay them (its
    slice capped to end by their planned starts, `backfill_cannot_delay`), in fair-share order. Only the unclaimed
    nodes it takes count against the session room. It comes last so that work which leaves a claimed node in
    seconds (opportunistic jobs) is placed there first: served in the first pass, gangs took those nodes from them.

    Reads the budget queues and what fair-share order left waiting and planned (`st.out`); writes starts
    (CycleState.start) and clears the blockers of the gangs it starts."""
    idle_claimed = _idle_claimed_nodes(st.cap)
    if not idle_claimed:
        return  # with no whole claimed node free, a gang could only fit where the first pass already looked
    waiting = {
        b: [j for j in q if _gang_waiting_for_capacity(st, j, idle_claimed)]
        for b, q in st.ix.queues.items()
        if b in st.ix.leaves
    }
    waiting = {b: q for b, q in waiting.items() if q}
    failed: set[FitKey] = set()  # capacity only falls within the pass: a shape that found no nodes finds none again
    pos = dict.fromkeys(waiting, 0)
    for name in waiting:
        st.fs.set_open(name, True)
    while (b := st.fs.pick()) is not None:
        q = waiting[b]
        i = pos[b]
        while i < len(q):
            job = q[i]
            i += 1
            t = terms(st, job)
            if t.blocker is not None or t.run_class is not RunClass.GUARANTEED:
                continue
            key = (job.gpus, job.replicas, id(t), st.ix.grace(job), False, job.cpus, job.memory)
            if key in failed or st.within_limits(job, job.total_gpus) is not None:
                continue
            placement = place_free(st, job, t, claimed_gangs=True)
            if placement is None:
                failed.add(key)
                continue
            st.out.unblock(job.id)
            start_free(st, job, t, placement, "fair-share")
            break  # the budget's usage changed: fair share picks the next budget afresh
        pos[b] = i
        if i >= len(q):
            st.fs.set_open(b, False)


def _idle_claimed_nodes(cap: Capacity) -> set[Pool]:
    """The pools with a node that a plan claims and whose GPUs are all free."""
    return {s.pool for s in cap.nodes if s.claim is not None and s.accepts and len(s.free) == s.node.gpus}


def _gang_waiting_for_capacity(st: CycleState, job: Job, pools: set[Pool]) -> bool:
    """A job of several nodes that the passes left waiting for capacity, with no plan of its own, that may run in
    one of `pools`."""
    if st.out.blockers.get(job.id) is not Blocker.CAPACITY or job.id in st.out.reserved:
        return False
    return any(p in pools and nodes_needed(job, node_size(st.cap, p)) > 1 for p in st.pools(job))


def _entitled_now(st: CycleState, budget: str) -> bool:
    """Rule `opportunistic-entitlement`: is the budget's opportunistic work still served beside guaranteed work — an
    entitled budget (state.entitled_budgets) that the cycle's starts have not yet brought up to its share?"""
    return budget in st.entitled and st.fs.standing(budget) < 1.0 - SHARE_SLACK


FitKey = tuple[int, int, int, Seconds, bool, int, int]
"""(GPUs, replicas, id of the interned Terms, grace, leaves within seconds, CPUs and memory per replica): jobs with
equal keys fit alike."""
SessionKey = tuple[int, int, Seconds, int, int]
"""(GPUs, id of the interned pools, grace, CPUs and memory per replica)."""
WindowJobKey = tuple[int, int, Seconds, int, int]
"""(GPUs, replicas, grace, CPUs and memory per replica)."""


class Served(Enum):
    """How fair-share order served one job (_consider)."""

    STARTED = "started"
    """Started in free GPUs, or GPUs were freed for it by preemption: its budget's usage changed."""
    PLANNED = "planned"
    """Got its budget's planned start."""
    WAITS = "waits"
    """Waits this cycle; its blocker is in the outcome."""
    DEFERRED = "deferred"
    """Would run opportunistically: left for the opportunistic pass."""


def _serve(st: CycleState, queues: dict[str, list[Job]], opportunistic_pass: bool) -> dict[str, list[Job]]:
    """One pass; returns the jobs that turned out to run opportunistically (budget cannot fund a slice, fallback
    accepted) when this is the guaranteed pass."""
    deferred: dict[str, list[Job]] = {}
    pos = dict.fromkeys(queues, 0)
    for name in queues:
        st.fs.set_open(name, True)
    free_failed: set[FitKey] = set()
    preempt_failed: set[FitKey] = set()
    while (b := st.fs.pick()) is not None:
        q = queues[b]
        i = pos[b]
        while i < len(q):
            job = q[i]
            i += 1
            served = _consider(st, job, free_failed, preempt_failed, opportunistic_pass)
            if served is Served.DEFERRED:
                deferred.setdefault(b, []).append(job)
            elif served is Served.STARTED:
                break  # the budget's usage changed: fair share picks the next budget afresh
        pos[b] = i
        if i >= len(q):
            st.fs.set_open(b, False)
    return deferred


def _consider(
    st: CycleState,
    job: Job,
    free_failed: set[FitKey],
    preempt_failed: set[FitKey],
    opportunistic_pass: bool,
) -> Served:
    """Try to start (or reserve GPUs for) one job, and say how it was served. What it learns goes to the outcome
    through its mark methods: the blocker of a job that waits (Outcome.block, or pass_over on the fast path), the
    budget's preemption search (tried_preemption) and planned start (plan_for, mark_reserved, deny_room)."""
    if (
        job.budget in st.out.preempt_tried
        and job.budget in st.out.planned_budgets
        and not st.cap.could_fit(job.gpus, job.replicas, st.pools(job))
    ):
        # fast path: only free GPUs could still help this job and no node has enough; explain() finds the blocker
        st.out.pass_over(job.id)
        return Served.WAITS
    if st.within_limits(job, job.total_gpus) is not None:
        st.out.block(job.id, Blocker.NO_POOL if never_fits(st, job) else Blocker.LIMIT)  # terms() says NO_POOL too
        return Served.WAITS
    t = terms(st, job)
    if t.blocker is not None:
        st.out.block(job.id, t.blocker)
        return Served.WAITS
    if t.run_class is RunClass.OPPORTUNISTIC and not opportunistic_pass and not _entitled_now(st, job.budget):
        return Served.DEFERRED
    # t has no blocker here, so it stands for (run class, pools, slice ends); terms() interns it: identity is equality
    key = (job.gpus, job.replicas, id(t), st.ix.grace(job), st.ix.quick(job), job.cpus, job.memory)
    if key not in free_failed:
        placement = place_free(st, job, t)
        if placement is not None:
            start_free(st, job, t, placement, "fair-share")
            return Served.STARTED
        free_failed.add(key)
    if t.run_class is not RunClass.GUARANTEED:
        st.out.block(job.id, Blocker.CAPACITY)
        return Served.WAITS
    # preemption is searched for once per budget and cycle: for its first job that does not fit in free GPUs
    if job.budget not in st.out.preempt_tried and key not in preempt_failed:
        st.out.tried_preemption(job.budget)
        below = st.fs.standing(job.budget) < 1.0
        # the rule takes opportunistic work alone, and, when `below`, slice-expired work on budget-dependent terms
        indexed = (("for-guaranteed",), _OpportunisticYields(st.kept), not below)
        if place_by_preemption(st, job, t, _GuaranteedVictims(st, job, t, below), indexed=indexed):
            return Served.STARTED
        if not below:
            preempt_failed.add(key)
    if job.budget not in st.out.planned_budgets and len(st.out.planned_budgets) < st.ix.pol.max_reservations:
        st.out.plan_for(job.budget)
        yields = st.yields_to(job, planned=True)
        spare = _room_spare(st, job, t)
        plan = plan_start(
            job,
            t.pools,
            st.cap,
            st.ix.topology,
            st.ix.now,
            yields,
            spare,
            st.earliest_bounds,
            st.ix.room_for,
            _RoomNode(st) if not room_exempt(st, job, t) else _no_room_node,
            _wait(st),
            st.ix.grace,
        )
        if plan is not None:
            planned = claim_and_call_due(st, job, plan.nodes, yields, plan.planned_start)
            names = tuple((st.cap.nodes[i].node.name, g) for i, g in plan.nodes)
            gave_way = tuple(sorted(o.job.id for i, _ in plan.nodes for o in st.cap.nodes[i].occupants if yields(o)))
            st.out.mark_reserved(Reserve(job.id, names, planned, ReservationKind.PLANNED, st.ix.now, gave_way))
            return Served.PLANNED
        if room_denied(job, t.pools, st.cap, st.ix.room_for):
            st.out.deny_room(job.id)
    st.out.block(job.id, Blocker.CAPACITY)
    return Served.WAITS


def _room_spare(st: CycleState, job: Job, t: Terms) -> Callable[[str, int], int | None]:
    """For planning (rule `session-room`): how many of a cluster's room GPUs — free, or held by fast-leaving work, on
    unclaimed nodes — a plan for `gpus` GPUs may count as its own: None (all it needs) where starting on them now
    would leave the session room whole, else the room beyond the session room (0 where there is none). Otherwise a
    plan for now would take the room the next cycle as a reservation start. Sessions and fast-leaving work are never
    held back."""
    exempt = headroom_filter(st, job, t)

    def spare(cluster: str, gpus: int) -> int | None:
        if exempt(cluster, gpus):
            return None
        return max(0, st.cap.room(cluster) - st.ix.room_for(cluster))

    return spare


def _no_room_node(cluster: str) -> tuple[int, int] | None:
    return None


class _RoomNode:
    """For planning (rule `node-shaped-room`): the cluster's room node and how many of its GPUs a plan may count
    there — those beyond a whole-node session — so a plan for now cannot take it the next cycle as a reservation
    start (a class, not a closure: core performance rules, 2)."""

    def __init__(self, st: CycleState) -> None:
        self.st = st

    def __call__(self, cluster: str) -> tuple[int, int] | None:
        whole = self.st.ix.whole_for(cluster)
        if whole <= 0:
            return None
        cap = self.st.cap
        node = cap.room_node(cluster, whole)
        return None if node is None else (node.idx, max(0, cap.soon(node) - whole))


class _OpportunisticYields:
    """The victim rule `opportunistic_yields` for guaranteed preemptors in this cycle: opportunistic work but that of
    the budgets `kept` (a class, not a closure: core performance rules, 2)."""

    __slots__ = ("kept",)

    def __init__(self, kept: frozenset[str]) -> None:
        self.kept = kept

    def __call__(self, occ: Occupant) -> PreemptReason | None:
        return opportunistic_yields(occ, PreemptReason.FOR_GUARANTEED, self.kept)


class _GuaranteedVictims:
    """The victim rule of a guaranteed job (rule `preempt-for-guaranteed`): opportunistic work, and when the
    preemptor's budget is `below` its share, slice-expired work on budget-dependent terms (a class, not a closure:
    core performance rules, 2)."""

    def __init__(self, st: CycleState, job: Job, t: Terms, below: bool) -> None:
        self.st = st
        self.opportunistic = _OpportunisticYields(st.kept)
        self.budget = job.budget
        self.below = below
        rate = min(st.ix.rate(p) for p in t.pools)
        self.after = st.fs.standing_after(job.budget, credits_per_hour(job.total_gpus, rate)) if below else 0.0

    def loss(self, occ: Occupant) -> float:
        run = occ.job.run
        gpus = 0 if run is None else run.gpu_count
        st = self.st
        return st.fs.standing_after(occ.job.budget, -credits_per_hour(gpus, st.ix.rate_of_run(occ.job)))

    def __call__(self, occ: Occupant) -> PreemptReason | None:
        found = self.opportunistic(occ)
        if found is None and self.below:
            found = expired_yields_to_under_share(occ, self.st.ix.now, self.budget, self.after, self.loss)
        return found


def headroom_refill(ix: Indices, cap: Capacity, out: Outcome) -> None:
    """Reads the nodes, claims and quick-free counts of `cap`; writes preemptions (to `out` and `cap`)."""
    now = ix.now

    def takes(occ: Occupant) -> PreemptReason | None:
        return session_takes(occ, now)

    clusters = sorted({s.node.cluster for s in cap.nodes})
    for cluster in clusters:
        want = ix.room_for(cluster)
        if want <= 0:
            continue
        deficit = cap.room_deficit(cluster, want)
        if deficit <= 0:
            continue
        slots = [s for s in cap.nodes if s.node.cluster == cluster and s.accepts]
        cands = [
            (s, o)
            for s in slots
            if s.claim is None
            for o in s.occupants
            if not ix.quick_occupant(o)  # already counted as headroom: taking it would free nothing new
            and o.job.id not in out.preempted
            and victim_reason(o, takes) is not None
        ]
        cands.sort(key=lambda so: (-len(so[0].free), so[1].gpus, lost_work(so[1], now), so[1].job.id))
        for _, occ in cands:
            if deficit <= 0:
                break
            out.preempt(ix, cap, occ.job, PreemptReason.HEADROOM, None, None)
            deficit -= occ.gpus
    for cluster in clusters:
        _refill_whole_node(ix, cap, out, cluster, takes)


def _refill_whole_node(
    ix: Indices, cap: Capacity, out: Outcome, cluster: str, takes: Callable[[Occupant], PreemptReason | None]
) -> None:
    """Rule `node-shaped-room`: where the cluster's room node (Capacity.room_node) lacks GPUs for the largest recent
    session, preempt the opportunistic or slice-expired work on it, smallest first, until it would have them."""
    whole = ix.whole_for(cluster)
    if whole <= 0:
        return
    node = cap.room_node(cluster, whole)
    if node is None:
        return
    short = whole - cap.soon(node)
    cands = sorted(
        (
            o
            for o in node.occupants
            if not o.quick and not o.leaving and o.job.id not in out.preempted and victim_reason(o, takes) is not None
        ),
        key=lambda o: (o.gpus, lost_work(o, ix.now), o.job.id),
    )
    for occ in cands:
        if short <= 0:
            break
        out.preempt(ix, cap, occ.job, PreemptReason.HEADROOM, None, None)
        short -= occ.gpus


def _wait(st: CycleState) -> Seconds:
    """How long a plan may wait for the work it calls away to save (rule `least-lost-work`)."""
    return st.ix.pol.checkpoint_wait
