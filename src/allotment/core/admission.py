"""Admitting one pending job: the terms it would run on, a placement in free GPUs, or a placement bought by preemption.

Owns the rules
- `slice-funding`: a guaranteed slice (or a session) is granted only if the budget can pay for all of it, on the pool
  it lands in; an unfunded guaranteed job that accepts it runs opportunistically instead (promise 2);
- `session-headroom`: only sessions and work that leaves within seconds may use a cluster's headroom (promise 9);
- `backfill-cannot-delay` applied to placement: work that would still hold reserved GPUs at a planned start is kept
  off them, or gets a slice that ends in time (promise 8);
- `never-preempt-in-vain`: victims are chosen only when the preemptor can then start on the GPUs they free, and
  those GPUs are reserved for it (promise 1 and the anti-thrash rules).

Must not: choose the order in which jobs are admitted (see pending.py) or emit pending reasons (reasons.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from allotment.core.capacity import NodeSlot, Occupant, Pool, is_quick
from allotment.core.decisions import Blocker, PreemptReason, Reserve
from allotment.core.model import ContractClass, Job, JobKind, Micro, ReservationKind, RunClass, Seconds
from allotment.core.placement import Placement, choose_block, find_free, gpus_held, node_size, nodes_needed
from allotment.core.preemption import victims_on_node
from allotment.core.reservations import backfill_cannot_delay, claim
from allotment.core.state import CycleState


@dataclass(frozen=True, slots=True)
class Terms:
    """How a job would run if admitted now: its class, the pools it may use and, per pool, its slice end."""

    run_class: RunClass
    pools: tuple[Pool, ...]
    slice_ends: tuple[Seconds | None, ...]
    blocker: Blocker | None
    """Why no pool is usable (FUNDS, WINDOW, NO_POOL, …), when `pools` is empty."""

    def slice_end(self, pool: Pool) -> Seconds | None:
        return self.slice_ends[self.pools.index(pool)]


def terms(st: CycleState, job: Job) -> Terms:
    """The run class, pools and slice ends a pending job could start with now (rule `slice-funding`). Cached per
    budget and job shape until the budget's promised money changes."""
    key = (
        job.budget,
        job.gpu_types,
        job.clusters,
        job.gpus,
        job.replicas,
        job.kind,
        job.contract,
        job.slice_seconds,
        job.fallback_opportunistic,
        st.committed.get(job.budget, 0),
    )
    found = st.terms_cache.get(key)
    if found is None:
        found = _terms(st, job)
        st.terms_cache[key] = found
    return found


def pool_costs(st: CycleState, job: Job) -> tuple[tuple[Pool, int, Micro], ...]:
    """(pool, GPUs held there, cost of a whole slice there) for every pool the job could ever run in; cached per
    job shape (it does not depend on the budget)."""
    key = (job.gpu_types, job.clusters, job.gpus, job.replicas, job.kind, job.slice_seconds)
    found = st.pool_costs.get(key)
    if found is None:
        length = st.slice_length(job)
        out = []
        for pool in st.pools(job):
            size = node_size(st.cap, pool)
            k = nodes_needed(job, size)
            need = job.total_gpus if k == 1 else size
            if k > 0 and sum(1 for g in st.cap.nodes_up.get(pool, ()) if g >= need) >= k:
                held = gpus_held(job, size)
                out.append((pool, held, st.slice_cost(job, held, pool, length)))
        found = st.pool_costs[key] = tuple(out)
    return found


def _terms(st: CycleState, job: Job) -> Terms:
    usable = pool_costs(st, job)
    if not usable:
        return Terms(RunClass.OPPORTUNISTIC, (), (), Blocker.NO_POOL)
    now = st.now
    if job.contract is ContractClass.OPPORTUNISTIC and job.kind is JobKind.BATCH:
        return Terms(RunClass.OPPORTUNISTIC, tuple(p for p, _, _ in usable), tuple(None for _ in usable), None)
    run_class = RunClass.SESSION if job.kind is JobKind.SESSION else RunClass.GUARANTEED
    length = st.slice_length(job)
    funded: list[Pool] = []
    ends: list[Seconds | None] = []
    blocker = Blocker.FUNDS
    available = st.available(job.budget)
    windows = st.windows
    for pool, held, full_cost in usable:
        end = now + length
        price = full_cost
        if pool in windows.by_pool:
            if not windows.window_lends_idle(job.budget, pool, held):
                blocker = Blocker.WINDOW
                continue
            end = windows.slice_end_before_window(job.budget, pool, held, end)
            if end - now < (length if job.kind is JobKind.SESSION else st.pol.min_slice):
                blocker = Blocker.WINDOW
                continue
            if end != now + length:
                price = st.slice_cost(job, held, pool, end - now)
        if available < price:
            continue
        funded.append(pool)
        ends.append(end)
    if funded:
        return Terms(run_class, tuple(funded), tuple(ends), None)
    if job.fallback_opportunistic and job.kind is JobKind.BATCH:
        return Terms(RunClass.OPPORTUNISTIC, tuple(p for p, _, _ in usable), tuple(None for _ in usable), None)
    return Terms(run_class, (), (), blocker)


def _node_filter(
    st: CycleState, job: Job, t: Terms, pool_of: Callable[[NodeSlot], Pool]
) -> Callable[[NodeSlot, int], bool]:
    grace = st.grace(job)
    strict = job.kind is JobKind.SESSION

    def ok(slot: NodeSlot, gpus: int) -> bool:
        if not slot.accepts:
            return False
        verdict = backfill_cannot_delay(slot, gpus, t.slice_end(pool_of(slot)), grace, st.pol.min_slice, st.now)
        return verdict is True or (verdict is not False and not strict)

    return ok


def headroom_filter(st: CycleState, job: Job, t: Terms, ignore: bool = False) -> Callable[[str, int], bool]:
    exempt = ignore or job.kind is JobKind.SESSION or (t.run_class is RunClass.OPPORTUNISTIC and st.quick(job))

    def ok(cluster: str, gpus: int) -> bool:
        return exempt or st.cap.quick_free.get(cluster, 0) - gpus >= st.pol.headroom_for(cluster)

    return ok


def final_slice_end(st: CycleState, job: Job, t: Terms, placement: Placement) -> Seconds | None:
    """The slice end after capping it at any planned start on the chosen nodes."""
    end = t.slice_end(placement.pool)
    if end is None:
        return None
    grace = st.grace(job)
    for idx, gpus in placement.nodes:
        verdict = backfill_cannot_delay(st.cap.nodes[idx], gpus, end, grace, st.pol.min_slice, st.now)
        if not isinstance(verdict, bool):
            end = min(end, verdict)
    return end


def place_free(st: CycleState, job: Job, t: Terms, ignore_headroom: bool = False) -> Placement | None:
    node_ok = _node_filter(st, job, t, lambda s: s.pool)
    return find_free(job, t.pools, st.cap, node_ok, headroom_filter(st, job, t, ignore_headroom), st.topology)


def start_free(st: CycleState, job: Job, t: Terms, placement: Placement, rule: str) -> None:
    st.start(job, placement, t.run_class, final_slice_end(st, job, t, placement), rule)


def _is_quick_occ(st: CycleState, occ: Occupant) -> bool:
    return is_quick(occ.job, st.pol.headroom_max_grace, st.pol.max_grace)


VictimRule = Callable[[Occupant], PreemptReason | None]


def place_by_preemption(
    st: CycleState,
    job: Job,
    t: Terms,
    rule: VictimRule,
    pools: Sequence[Pool] | None = None,
    ignore_headroom: bool = False,
) -> bool:
    """Free GPUs for the job by preempting work the rule allows, reserve them for it, and return True; or change
    nothing and return False when no choice of victims lets the job start (rule `never-preempt-in-vain`)."""
    now = st.now
    cluster_ok = headroom_filter(st, job, t, ignore_headroom)
    best: tuple[tuple[int, int], Pool, list[tuple[int, int]], list[tuple[Occupant, PreemptReason]], Seconds] | None
    best = None
    for pool in pools if pools is not None else t.pools:
        size = node_size(st.cap, pool)
        k = nodes_needed(job, size)
        need = job.total_gpus if k == 1 else size
        if k == 0:
            continue
        per_node: dict[int, tuple[list[tuple[Occupant, PreemptReason]], Seconds, tuple[int, int]]] = {}
        for idx in st.cap.pools.get(pool, ()):
            slot = st.cap.nodes[idx]
            if not slot.accepts or slot.claim is not None or slot.node.gpus < need:
                continue
            if k > 1 and slot.node.gpus != size:
                continue
            v = victims_on_node(slot, need, now, rule, st.grace)
            if v is None:
                continue
            # headroom: only free GPUs and fast-leaving victims count against it
            from_headroom = min(len(slot.free), need) + sum(o.gpus for o in v.occupants if _is_quick_occ(st, o))
            if not cluster_ok(pool[0], from_headroom):
                continue
            per_node[idx] = (list(zip(v.occupants, v.reasons, strict=True)), v.ready_at, v.cost)
        if len(per_node) < k:
            continue
        if k == 1:
            idx = min(per_node, key=lambda i: (per_node[i][2], per_node[i][1], i))
            chosen = [idx]
        else:
            cands = [(i, float(c[2][0] * 1_000_000 + c[2][1])) for i, c in per_node.items()]
            picked = choose_block(cands, k, st.cap, st.topology.get(pool[0], ()))
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
    claim(st.cap, job.id, nodes, ready)
    names = tuple((st.cap.nodes[i].node.name, g) for i, g in nodes)
    st.reserves.append(Reserve(job.id, names, ready, ReservationKind.PREEMPTION, st.now))
    st.reserved.add(job.id)
    held = sum(g for _, g in nodes)
    st.fs.hold(job.budget, held * st.rate(pool) / 1_000_000)
    for name in st.fs.ancestors(job.budget):
        st.held[name] = st.held.get(name, 0) + held
    end = t.slice_end(pool)
    if end is not None:
        st.committed[job.budget] = st.committed.get(job.budget, 0) + st.slice_cost(job, held, pool, end - now)
    if job.kind is JobKind.SESSION:
        st.sessions_of[job.user] = st.sessions_of.get(job.user, 0) + 1
    return True
