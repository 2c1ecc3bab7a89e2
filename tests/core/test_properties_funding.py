"""Promise 2: a guaranteed slice (or a session) is granted only if its budget can pay for all of it, and guaranteed
work never overdraws a budget; a budget that cannot fund a slice runs only opportunistic work, and only for jobs that
are opportunistic or accept the fallback."""

from __future__ import annotations

from hypothesis import example, given

from allotment.core.decisions import PreemptReason
from allotment.core.model import FULL_PRICE, ContractClass, JobKind, Reservation, ReservationKind, RunClass
from allotment.core.units import cost
from tests.core.builders import World
from tests.core.strategies import PROPERTY, Case, cases, committed, decide, price_of, rate_on

END_OF_LIFE = frozenset(
    {
        PreemptReason.NODE_DOWN,
        PreemptReason.FORCED,
        PreemptReason.MAX_RUNTIME,
        PreemptReason.SESSION_END,
        PreemptReason.IDLE_SESSION,
    }
)
"""Reasons a run ends before its slice end is looked at (step 1 of the cycle)."""


@PROPERTY
@given(cases())
def test_every_granted_slice_and_renewal_is_affordable(case: Case) -> None:
    snap, now = case.snapshot, case.now
    d = decide(case)
    jobs = {j.id: j for j in snap.jobs}
    promised = committed(snap, now)
    granted: dict[str, int] = {}
    for s in d.starts:
        if s.slice_end is not None:
            job = jobs[s.job_id]
            gpus = sum(len(a.gpus) for a in s.placement)
            amount = cost(gpus, rate_on(snap, s.placement), price_of(snap.policy, s.run_class), s.slice_end - now)
            granted[job.budget] = granted.get(job.budget, 0) + amount
    for r in d.renews:
        job = jobs[r.job_id]
        assert job.run is not None
        amount = cost(job.run.gpu_count, rate_on(snap, job.run.placement), FULL_PRICE, r.slice_end - now)
        granted[job.budget] = granted.get(job.budget, 0) + amount
    for budget, amount in granted.items():
        available = snap.accounts[budget].balance - promised.get(budget, 0)
        assert amount <= available, f"{budget}: slices worth {amount} granted with only {available} available"


@PROPERTY
@given(cases())
def test_starts_carry_the_contract_their_job_asked_for(case: Case) -> None:
    snap, now, pol = case.snapshot, case.now, case.snapshot.policy
    d = decide(case)
    jobs = {j.id: j for j in snap.jobs}
    for s in d.starts:
        job = jobs[s.job_id]
        assert job.run is None
        if s.slice_end is None:
            assert s.run_class is RunClass.OPPORTUNISTIC and job.kind is JobKind.BATCH
            assert job.contract is ContractClass.OPPORTUNISTIC or job.fallback_opportunistic
        elif job.kind is JobKind.SESSION:
            assert s.run_class is RunClass.SESSION and s.slice_end == now + job.slice_seconds
        else:
            assert s.run_class is RunClass.GUARANTEED and job.contract is ContractClass.GUARANTEED
            assert now + pol.min_slice <= s.slice_end <= now + pol.max_slice


@PROPERTY
@given(cases())
def test_every_ended_slice_is_renewed_or_lapses_once(case: Case) -> None:
    snap, now, pol = case.snapshot, case.now, case.snapshot.policy
    d = decide(case)
    ended = {p.job_id for p in d.preempts if p.reason in END_OF_LIFE}
    renewed = [r.job_id for r in d.renews]
    lapsed = [lp.job_id for lp in d.lapses]
    assert len(set(renewed + lapsed)) == len(renewed) + len(lapsed)
    due = {
        j.id
        for j in snap.jobs
        if j.run is not None
        and j.run.run_class is RunClass.GUARANTEED
        and j.run.slice_end is not None
        and j.run.slice_end <= now
        and j.run.preemption is None
        and j.id not in ended
    }
    assert set(renewed) | set(lapsed) == due
    for r in d.renews:
        assert now + pol.min_slice <= r.slice_end <= now + pol.max_slice


def _carried_plan_over_the_limit() -> Case:
    """red may hold 2 GPUs and holds 2; its waiting job carries a planned start on a free node."""
    w = World().cluster("c1", nodes=2).budget("red", max_gpus=2)
    w.running("r", "red", {"c1-h100-00": 2}, started=0, slice_end=3600)
    w.pending("p", "red", gpus=1, submitted_at=0)
    w.reserve(Reservation("p", (("c1-h100-01", 1),), 60, ReservationKind.PLANNED))
    return Case(w.snapshot(), 60, {})


@PROPERTY
@example(_carried_plan_over_the_limit())
@given(cases())
def test_no_start_takes_a_budget_over_its_gpu_limit(case: Case) -> None:
    """A budget's max_gpus bounds the GPUs its whole subtree holds: no start may take it (or an ancestor) over."""
    snap = case.snapshot
    d = decide(case)
    budgets = {b.name: b for b in snap.budgets}
    jobs = {j.id: j for j in snap.jobs}

    def chain(name: str) -> list[str]:
        out: list[str] = []
        cur: str | None = name
        while cur is not None and cur in budgets:
            out.append(cur)
            cur = budgets[cur].parent
        return out

    held: dict[str, int] = {}
    for job in snap.jobs:
        if job.run is not None:
            for name in chain(job.budget):
                held[name] = held.get(name, 0) + job.run.gpu_count
    for s in d.starts:
        gpus = sum(len(a.gpus) for a in s.placement)
        for name in chain(jobs[s.job_id].budget):
            held[name] = held.get(name, 0) + gpus
            limit = budgets[name].max_gpus
            assert limit is None or held[name] <= limit, f"{s.job_id} takes {name} to {held[name]} of {limit} GPUs"
