"""Cycle steps over work that already holds GPUs: ends of life, slice ends, drains and carried reservations.

Owns the rules
- `end-of-life`: lost nodes (refunded), forced drains (refunded), maximum runtime, session length, idle sessions;
- `slice-renewal`: at its slice end a guaranteed run is renewed when its budget can pay for the whole new slice and
  renewing delays no planned start, crowds out no capacity window and leaves no cluster short of its session room
  (nor its room node short of a whole-node session, rule `node-shaped-room`); otherwise it lapses and runs on as
  opportunistic (promise 2);
- `drain`: on a draining node preemptible work leaves now, work inside its slice at the slice end (promise 4);
- `carried-reservation`: a planned start from an earlier cycle keeps its nodes while they stay usable.

Must not: start pending work (see pending.py).
"""

from __future__ import annotations

from dataclasses import replace

from allotment.core.capacity import Capacity, NodeSlot, Occupant
from allotment.core.decisions import Lapse, PreemptReason, Renew, Reserve
from allotment.core.funding import terms
from allotment.core.indices import Indices
from allotment.core.model import (
    FULL_PRICE,
    ContractClass,
    Job,
    JobKind,
    NodeState,
    Reservation,
    ReservationKind,
    RunClass,
    Seconds,
)
from allotment.core.outcome import Outcome
from allotment.core.placement import asks_beside, node_size, nodes_needed
from allotment.core.preemption import fewest_victims, reservation_claims, victim_reason
from allotment.core.reservations import (
    Capped,
    Yields,
    claim,
    earliest_on_node,
    planned_on,
    renewal_cannot_delay,
    use_spare_renewal,
)
from allotment.core.state import Carried, CycleState
from allotment.core.units import cost
from allotment.core.windows import WindowBook


def end_of_life(ix: Indices, cap: Capacity, out: Outcome) -> None:
    """Reads the snapshot's running jobs and the nodes they hold; writes preemptions (to `out`, and their
    occupants' leave times to `cap`)."""
    now = ix.now
    for job in ix.snap.jobs:
        run = job.run
        if run is None or run.preemption is not None:
            continue
        states = [s.node for a in run.placement if (s := cap.slot(a.node)) is not None]
        if len(states) < len(run.placement) or any(n.state is NodeState.DOWN for n in states):
            out.preempt(ix, cap, job, PreemptReason.NODE_DOWN, None, None)
        elif any(n.state is NodeState.DRAINING and n.forced for n in states):
            out.preempt(ix, cap, job, PreemptReason.FORCED, None, None)
        elif job.max_runtime is not None and now - run.started_at >= job.max_runtime:
            out.preempt(ix, cap, job, PreemptReason.MAX_RUNTIME, None, False)
        elif job.kind is JobKind.SESSION and run.slice_end is not None and now >= run.slice_end:
            out.preempt(ix, cap, job, PreemptReason.SESSION_END, None, False)
        elif (
            job.kind is JobKind.SESSION
            and run.idle_since is not None
            and now - run.idle_since >= ix.pol.session_idle_timeout
        ):
            out.preempt(ix, cap, job, PreemptReason.IDLE_SESSION, None, False)


def slice_ends(ix: Indices, cap: Capacity, windows: WindowBook, out: Outcome) -> None:
    """Renew or lapse every guaranteed run whose slice has ended, earliest slice end first (then job id), so the order
    of jobs in the snapshot never decides which renewal a budget's money covers.

    Reads the claims and occupants of `cap`, the window book and the money left in `out`; writes renewals and lapses
    (to `out`), the renewed slices (to `windows`) and the renewed occupants' leave times (to `cap`)."""
    now = ix.now
    deficits: dict[str, int] = {}
    ended = (j for j in ix.snap.jobs if j.run is not None and j.run.slice_end is not None and j.run.slice_end <= now)
    for job in sorted(ended, key=lambda j: (j.run.slice_end if j.run is not None else 0, j.id)):
        run = job.run
        if (
            run is None
            or run.run_class is not RunClass.GUARANTEED
            or run.slice_end is None
            or run.slice_end > now
            or run.preemption is not None
            or job.id in out.preempted
        ):
            continue
        if _room_needs(ix, cap, deficits, job):
            out.mark_lapsed(Lapse(job.id, "the session room needs its GPUs"))
            continue
        why = _renewal_blocker(ix, cap, windows, out, job)
        if isinstance(why, str):
            out.mark_lapsed(Lapse(job.id, why))
            continue
        gpus = run.gpu_count
        rate = ix.rate_of_run(job)
        out.mark_renewed(Renew(job.id, why), job.budget, cost(gpus, rate, FULL_PRICE, why - now))
        pool = ix.node_pool[run.placement[0].node]
        windows.commit(job.budget, pool, gpus, why)
        grace = ix.grace(job)
        for occ in cap.occupants_of.get(job.id, ()):
            use_spare_renewal(cap.nodes[occ.node], occ, why, grace)
            cap.update_occupant(occ, leaving=occ.leaving, preemptible=False, leave=why + grace)


def _room_needs(ix: Indices, cap: Capacity, deficits: dict[str, int], job: Job) -> bool:
    """Rule `session-room`: a slice is not renewed on unclaimed nodes of a cluster short of its session room; the
    lapsed job's GPUs count as returning to the room, so only as many renewals lapse as the room lacks (the refill
    or a session then takes that work). Rule `node-shaped-room`: nor is one renewed on the cluster's room node
    (Capacity.room_node) where the renewal would leave that node unable to hold the largest recent session."""
    run = job.run
    assert run is not None
    slots = [s for a in run.placement if (s := cap.slot(a.node)) is not None]
    if not slots or any(s.claim is not None or not s.accepts for s in slots):
        return False
    cluster = slots[0].node.cluster
    whole = ix.whole_for(cluster)
    if whole > 0:
        # rule `node-shaped-room`: a renewal may not leave the room node unable to hold the largest recent session
        node = cap.room_node(cluster, whole)
        if node is not None and any(
            o.node == node.idx and node.reach - o.gpus < whole for o in cap.occupants_of[job.id]
        ):
            return True
    deficit = deficits.get(cluster)
    if deficit is None:
        deficit = deficits[cluster] = cap.room_deficit(cluster, ix.room_for(cluster))
    if deficit <= 0:
        return False
    deficits[cluster] = deficit - run.gpu_count
    return True


def _renewal_blocker(ix: Indices, cap: Capacity, windows: WindowBook, out: Outcome, job: Job) -> Seconds | str:
    """The renewed slice end, or why the slice lapses."""
    run = job.run
    assert run is not None
    now = ix.now
    slots = [s for a in run.placement if (s := cap.slot(a.node)) is not None]
    if any(s.node.state not in (NodeState.READY, NodeState.CORDONED) for s in slots):
        return "node draining"
    pool = ix.node_pool[run.placement[0].node]
    gpus = run.gpu_count
    length = ix.slice_length(job)
    end = windows.slice_end_before_window(job.budget, pool, gpus, now + length)
    if not windows.window_lends_idle(job.budget, pool, gpus):
        return "pool booked by a capacity window"
    grace = ix.grace(job)
    for occ in cap.occupants_of.get(job.id, ()):
        slot = cap.nodes[occ.node]
        verdict = renewal_cannot_delay(slot, occ, end, grace, ix.pol.min_slice, now)
        if verdict is False:
            return "GPUs reserved for a planned start"
        if isinstance(verdict, Capped):
            end = min(end, verdict.end)
    if end - now < ix.pol.min_slice:
        return "a capacity window or planned start leaves less than the minimum slice"
    if out.available(ix, job.budget) < cost(gpus, ix.rate(pool), FULL_PRICE, end - now):
        return "budget cannot pay for another slice"
    return end


def drains(ix: Indices, cap: Capacity, out: Outcome) -> None:
    """Preemptible work leaves draining nodes now; work inside its slice stays until the slice ends. Reads the
    nodes of `cap`; writes preemptions (to `out` and `cap`)."""
    for slot in cap.nodes:
        if slot.node.state is not NodeState.DRAINING:
            continue
        for occ in list(slot.occupants):
            if occ.preemptible and occ.job.id not in out.preempted:
                out.preempt(ix, cap, occ.job, PreemptReason.DRAIN, None, None)


def drain_estimates(ix: Indices, cap: Capacity) -> dict[str, Seconds]:
    """When each draining (or cordoned-and-busy) node will be empty, given this cycle's decisions (read from
    `cap`)."""
    found: dict[str, Seconds] = {}
    for slot in cap.nodes:
        if slot.node.state is NodeState.DRAINING:
            found[slot.node.name] = max((o.leave for o in slot.occupants), default=ix.now)
    return found


def install_carried(st: CycleState) -> list[Carried]:
    """Keep last cycle's reservations whose job still waits and whose nodes are still usable; claim those nodes.
    Reads the snapshot's reservations, the budget heads' terms and limits; writes claims (to `st.cap`) and planned
    budgets (to `st.out`).

    A budget keeps one planned start, for its current first job: when a user reorders the budget's jobs, the plan
    passes to the new first job if it fits the same nodes (so reordering one's own jobs never frees or moves GPUs
    another budget sees), and is dropped otherwise. Reservations for GPUs being freed by preemption are always kept
    while valid (dropping them would let another job take the GPUs the victims gave up: a preemption loop)."""
    heads = _budget_heads(st)
    reserved = {r.job_id for r in st.ix.snap.reservations}
    kept: list[Carried] = []
    holders: set[str] = set()  # jobs given a reservation here: one each, or a job handed two plans starts twice
    for original in sorted(st.ix.snap.reservations, key=lambda r: (r.planned_start, r.job_id)):
        res = original
        job = st.ix.jobs.get(res.job_id)
        if job is None or not job.pending:
            continue
        if res.kind is ReservationKind.PLANNED and heads.get(job.budget) != job.id:
            head = heads.get(job.budget)
            if head is None or head in reserved:
                continue
            job = st.ix.jobs[head]
            res = replace(res, job_id=head)
        if job.id in holders:
            continue
        slots = [st.cap.slot(name) for name, _ in res.nodes]
        if any(s is None or not s.accepts or s.claim is not None for s in slots):
            continue
        real = [s for s in slots if s is not None]
        pools = {s.pool for s in real}
        if len(pools) != 1:
            continue
        pool = next(iter(pools))
        if pool not in st.pools(job):
            continue
        size = node_size(st.cap, pool)
        k = nodes_needed(job, size)
        need = job.total_gpus if k == 1 else size
        if k != len(real) or any(s.node.gpus < need for s in real):
            continue
        nodes = tuple((s.idx, need) for s in real)
        also = original.job_id if original.job_id != job.id else None
        yields = _remembering(st.yields_to(job, also, planned=res.kind is ReservationKind.PLANNED), res)
        beside = job if asks_beside(job) else None
        starts = [earliest_on_node(s, need, st.ix.now, yields, None, beside) for s in real]
        if any(t is None for t in starts):
            continue
        wait = st.ix.pol.checkpoint_wait
        planned = planned_on(st.cap, nodes, st.ix.now, yields, wait, st.ix.grace, beside, res.planned_start)
        claim(st.cap, job.id, nodes, planned, yields)
        kept.append(Carried(res, job, pool, nodes, yields))
        holders.add(job.id)
        if res.kind is ReservationKind.PLANNED:
            st.out.plan_for(job.budget)
    return kept


def _remembering(yields: Yields, res: Reservation) -> Yields:
    """A carried plan's occupants give way to it if they do now or did when the plan was made (promise 8: the
    standings may have moved since, but the planned start was promised on what was known then)."""
    return _Remembering(yields, frozenset(res.gave_way)) if res.gave_way else yields


class _Remembering:
    """_remembering's rule (a class, not a closure: core performance rules, 2)."""

    def __init__(self, yields: Yields, gave_way: frozenset[str]) -> None:
        self.yields = yields
        self.gave_way = gave_way

    def __call__(self, occ: Occupant) -> bool:
        return occ.job.id in self.gave_way or self.yields(occ)


def _budget_heads(st: CycleState) -> dict[str, str]:
    """Each budget's first pending guaranteed batch job in its own order (priority, then age) that could hold a
    planned start now: within its budget's limits and funded for a guaranteed slice on some pool — the job that
    fair-share order would plan for. A job before it that can never be planned (no pool could ever hold it, its
    budget cannot pay for its slice), or that GPUs are being freed for by preemption (its own reservation), does
    not take the budget's plan away from the job that holds it."""
    freed_for = {r.job_id for r in st.ix.snap.reservations if r.kind is ReservationKind.PREEMPTION}
    heads: dict[str, str] = {}
    for budget, queue in st.ix.queues.items():
        for job in queue:
            if job.contract is ContractClass.GUARANTEED and job.id not in freed_for and _may_hold_a_plan(st, job):
                heads[budget] = job.id
                break
    return heads


def _may_hold_a_plan(st: CycleState, job: Job) -> bool:
    if st.within_limits(job, job.total_gpus) is not None:
        return False
    t = terms(st, job)
    return t.blocker is None and t.run_class is RunClass.GUARANTEED


def due_victims(st: CycleState, slot: NodeSlot, need: int, planned: Seconds) -> list[Occupant]:
    """Preemptible work on a reserved node that must be told to leave now so the node is ready by `planned`, counted
    the way the planned start was (earliest_on_node): GPUs free now, work already leaving and slice work that gives
    way and whose slice ends in time cover part of the need; of the preemptible work that gives way and could be
    gone by `planned`, the fewest that cover the rest — each only once its grace would end at `planned` or later."""
    c = slot.claim
    yields = c.yields if c is not None else (lambda o: True)
    have = len(slot.free)
    eligible: list[tuple[Occupant, PreemptReason]] = []
    for occ in slot.occupants:
        if occ.leave > planned or not (occ.leaving or yields(occ)):
            continue
        reason = victim_reason(occ, reservation_claims)
        if reason is not None:
            eligible.append((occ, reason))
        else:
            have += occ.gpus  # already leaving, or its slice ends in time and it gives way (it cannot renew here)
            if occ.job.run is None and occ.job.id in st.out.started:
                # started in this cycle without a slice (opportunistic work placed before the plan was made): it
                # may be told to leave from the next cycle, so decide again at once rather than after the planned
                # start
                st.out.wake_by(st.ix.now + 1)
    if have >= need:
        return []
    # told to leave only once its notice would end at the planned start or later: earlier, the GPUs it frees would
    # idle until then, and the backfill rule would hand them straight back to opportunistic work (a start/preempt
    # loop every cycle)
    chosen = fewest_victims(eligible, need - have, st.ix.now)
    due: list[Occupant] = []
    for occ, _ in chosen:
        call_at = planned - st.ix.grace(occ.job)
        if call_at <= st.ix.now:
            due.append(occ)
        else:
            st.out.wake_by(call_at)  # decide again then, or the plan would wait for whichever cycle comes next
    return due


def reservation_reserve(st: CycleState, carried: Carried, planned: Seconds) -> None:
    nodes = tuple((st.cap.nodes[i].node.name, g) for i, g in carried.nodes)
    res = carried.reservation
    st.out.mark_reserved(Reserve(carried.job.id, nodes, planned, res.kind, res.since, res.gave_way))
