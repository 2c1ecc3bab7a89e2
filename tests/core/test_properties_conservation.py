"""Promise 5, work conservation: after a cycle, no pending job that fits in free GPUs is left waiting, except for GPUs
held as session headroom or reserved for a planned start.

The statement checked, worked out from pending.py and admission.py: take the fleet after the cycle's starts (GPUs of
leaving work are not free yet) and the nodes its reservations claim. A pending job that waits for capacity (its
blocker is not FUNDS, LIMIT, SESSION_LIMIT, NO_POOL or WINDOW) and holds no reservation must not fit on ready,
unclaimed nodes of a pool it could have used: whole free nodes for a multi-node gang, one node with enough free GPUs
otherwise, leaving the cluster's session room (free GPUs plus GPUs of quick-leaving work, on nodes no reservation
claims) intact unless it is a session or quick-leaving work itself. A pool it could have used is one its budget can
fund a slice on even after the cycle's own grants (any pool for opportunistic work, or for a fallback job whose
budget could fund none before the cycle), and for slices, one no capacity window of another budget touches (windows
are promise 4's business).
Capacity only shrinks during a cycle, so a job that fits afterwards also fitted when the cycle considered it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import example, given
from hypothesis import strategies as st

from allotment.core.decisions import Blocker, Decisions
from allotment.core.model import (
    ContractClass,
    Job,
    JobKind,
    NodeState,
    Reservation,
    ReservationKind,
    RunClass,
    Snapshot,
)
from allotment.core.units import cost
from tests.core.builders import HOUR, World
from tests.core.strategies import (
    PROPERTY,
    ROOMY,
    Case,
    Knobs,
    cases,
    committed,
    decide,
    held_gpus,
    nodes_needed,
    pools_of,
    price_of,
    rate_on,
    slice_length,
)

NOT_CAPACITY = frozenset({Blocker.FUNDS, Blocker.LIMIT, Blocker.SESSION_LIMIT, Blocker.NO_POOL, Blocker.WINDOW})


@dataclass
class After:
    """The fleet after a cycle's starts."""

    free: dict[str, int]
    claimed: set[str]
    quick_free: dict[str, int]
    available: dict[str, int]
    """Per budget: balance − slices already running − slices granted, renewed or promised in this cycle."""
    available_before: dict[str, int]


def quick(snap: Snapshot, job: Job) -> bool:
    pol = snap.policy
    return (
        job.kind is JobKind.BATCH
        and job.contract is ContractClass.OPPORTUNISTIC
        and min(job.grace, pol.max_grace) <= pol.headroom_max_grace
    )


def after(case: Case, d: Decisions) -> After:
    snap, now, pol = case.snapshot, case.now, case.snapshot.policy
    jobs = {j.id: j for j in snap.jobs}
    held = held_gpus(snap)
    for s in d.starts:
        for a in s.placement:
            held[a.node] |= set(a.gpus)
    ready = {n.name: n for n in snap.nodes if n.state is NodeState.READY}
    free = {name: n.gpus - len(held[name]) for name, n in ready.items()}
    claimed = {name for r in d.reserves for name, _ in r.nodes}
    quick_free: dict[str, int] = {}  # the session room: free and fast-leaving GPUs on ready, unclaimed nodes
    for name, n in ready.items():
        if name not in claimed:
            quick_free[n.cluster] = quick_free.get(n.cluster, 0) + free[name]
    running_quick = [
        (j.run.placement)
        for j in snap.jobs
        if j.run is not None and j.run.preemption is None and j.run.slice_end is None and quick(snap, j)
    ]
    started_quick = [
        s.placement for s in d.starts if s.run_class is RunClass.OPPORTUNISTIC and quick(snap, jobs[s.job_id])
    ]
    for placement in running_quick + started_quick:
        for a in placement:
            if a.node in ready and a.node not in claimed:
                c = ready[a.node].cluster
                quick_free[c] = quick_free.get(c, 0) + len(a.gpus)
    before = {b: acc.balance - committed(snap, now).get(b, 0) for b, acc in snap.accounts.items()}
    spent: dict[str, int] = {}
    for s in d.starts:
        if s.slice_end is not None:
            gpus = sum(len(a.gpus) for a in s.placement)
            amount = cost(gpus, rate_on(snap, s.placement), price_of(pol, s.run_class), s.slice_end - now)
            spent[jobs[s.job_id].budget] = spent.get(jobs[s.job_id].budget, 0) + amount
    for r in d.renews:
        run = jobs[r.job_id].run
        assert run is not None
        amount = cost(run.gpu_count, rate_on(snap, run.placement), 1000, r.slice_end - now)
        spent[jobs[r.job_id].budget] = spent.get(jobs[r.job_id].budget, 0) + amount
    top_rate = max(snap.rates.values())
    for res in d.reserves:
        if res.kind is not ReservationKind.PREEMPTION:
            continue  # a planned start commits no money until it starts
        job = jobs[res.job_id]
        gpus = sum(g for _, g in res.nodes)
        bound = cost(gpus, top_rate, max(1000, pol.session_price), slice_length(pol, job))
        spent[job.budget] = spent.get(job.budget, 0) + bound
    available = {b: v - spent.get(b, 0) for b, v in before.items()}
    return After(free, claimed, quick_free, available, before)


def usable_pools(case: Case, job: Job, a: After) -> tuple[list[tuple[str, str]], bool]:
    """The pools the cycle surely tried for this job, and whether it ran as opportunistic work there."""
    snap, now, pol = case.snapshot, case.now, case.snapshot.policy
    pools = [p for p in pools_of(snap, job) if nodes_needed(job) > 0]
    if job.kind is JobKind.BATCH and job.contract is ContractClass.OPPORTUNISTIC:
        return pools, True
    price = pol.session_price if job.kind is JobKind.SESSION else 1000
    length = slice_length(pol, job)

    def slice_cost(pool: tuple[str, str]) -> int:
        k = nodes_needed(job)
        return cost(job.total_gpus if k == 1 else 8 * k, snap.rates[pool[1]], price, length)

    unfunded = all(a.available_before.get(job.budget, 0) < slice_cost(p) for p in pools)
    if job.fallback_opportunistic and job.kind is JobKind.BATCH and unfunded:
        return pools, True
    windowed = {(w.cluster, w.gpu_type) for w in snap.windows if w.budget != job.budget and w.end > now}
    return [p for p in pools if p not in windowed and a.available.get(job.budget, 0) >= slice_cost(p)], False


def fits(case: Case, job: Job, pool: tuple[str, str], opportunistic: bool, a: After) -> bool:
    snap = case.snapshot
    k = nodes_needed(job)
    cand = [
        n
        for n in snap.nodes
        if (n.cluster, n.gpu_type) == pool and n.name in a.free and n.name not in a.claimed and n.gpus == 8
    ]
    gpus = job.total_gpus if k == 1 else 8 * k
    exempt = job.kind is JobKind.SESSION or (opportunistic and quick(snap, job))
    if not exempt and a.quick_free.get(pool[0], 0) - gpus < snap.policy.headroom_for(pool[0]):
        return False
    if k == 1:
        return any(a.free[n.name] >= gpus for n in cand)
    return sum(1 for n in cand if a.free[n.name] == n.gpus) >= k


def check_conservation(case: Case) -> None:
    d = decide(case)
    a = after(case, d)
    reserved = {r.job_id for r in d.reserves}
    jobs = {j.id: j for j in case.snapshot.jobs}
    for job_id, why in d.pending.items():
        if why.blocker in NOT_CAPACITY or job_id in reserved:
            continue
        job = jobs[job_id]
        pools, opportunistic = usable_pools(case, job, a)
        for pool in pools:
            assert not fits(case, job, pool, opportunistic, a), f"{job_id} waits but fits in {pool}: {why}"


def _stale_reservation() -> Case:
    """A job carries a reservation (GPUs being freed for it) on a pool that a capacity window of another budget has
    since booked; the job fits right now on a free node of another cluster."""
    w = World().cluster("c1", nodes=1).cluster("c2", nodes=1).budget("red").budget("blue")
    w.window("w", "blue", "c1", gpus=8, start=0, end=10 * HOUR)
    w.pending("p1", "red", gpus=4)
    w.reserve(Reservation("p1", (("c1-h100-00", 4),), 0, ReservationKind.PREEMPTION))
    return Case(w.snapshot(), 60, {})


@PROPERTY
@example(_stale_reservation())
@given(cases())
def test_no_job_waits_while_it_fits_in_free_gpus(case: Case) -> None:
    check_conservation(case)


def _plan_on_a_leaving_node() -> Case:
    """A job carries a planned start on a node whose holder is leaving (killed in a minute); the other node of the
    cluster is entirely free."""
    w = World().cluster("c1", nodes=2).budget("red").budget("blue")
    w.running("r1", "blue", {"c1-h100-00": 8}, started=0, slice_end=30, leaving_until=120)
    w.pending("p1", "red", gpus=1)
    w.reserve(Reservation("p1", (("c1-h100-00", 1),), 120, ReservationKind.PLANNED))
    return Case(w.snapshot(), 60, {})


@PROPERTY
@example(_plan_on_a_leaving_node())
@given(cases())
def test_a_job_with_a_later_planned_start_does_not_wait_while_it_fits_now(case: Case) -> None:
    """A planned start is a promise of GPUs, not a reason to wait: a job whose plan lies in the future must not be
    left waiting while it fits in free, unclaimed GPUs of its pools right now."""
    d = decide(case)
    a = after(case, d)
    jobs = {j.id: j for j in case.snapshot.jobs}
    for res in d.reserves:
        if res.planned_start <= case.now or res.kind is not ReservationKind.PLANNED:
            continue
        job = jobs[res.job_id]
        pools, opportunistic = usable_pools(case, job, a)
        for pool in pools:
            assert not fits(case, job, pool, opportunistic, a), (
                f"{job.id} waits for its planned start at +{res.planned_start - case.now}s but fits now in {pool}"
            )


@PROPERTY
@given(st.one_of(cases(replace(Knobs(), reservations=False)), cases(replace(ROOMY, reservations=False))))
def test_no_job_waits_while_it_fits_in_free_gpus_without_carried_reservations(case: Case) -> None:
    """The same property on snapshots with no reservation carried from an earlier cycle (so that it keeps guarding
    the rest of the cycle while the carried-reservation cases above are expected to fail)."""
    check_conservation(case)
