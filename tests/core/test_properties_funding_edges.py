"""Promise 2 at the edge of the money (issue 19): with room for every job, exactly the guaranteed jobs whose whole
slice their budget can still pay for, in the budget's own order, get a slice — one micro short is not enough, and
what one budget or one job shape may afford says nothing about another; the others run opportunistically when they
accept it, or wait for funds."""

from __future__ import annotations

from hypothesis import given

from allotment.core.decisions import Blocker
from allotment.core.model import ContractClass, Job, RunClass
from tests.core.strategies import PROPERTY, Case, committed, decide, slice_length
from tests.core.strategies_edges import funding_edges, serving_order, slice_price


def expected(case: Case) -> tuple[dict[str, int | None], set[str]]:
    """(slice end, or None for an opportunistic start, per job that starts; jobs that wait for funds)."""
    snap, now = case.snapshot, case.now
    promised = committed(snap, now)
    starts: dict[str, int | None] = {}
    waiting: set[str] = set()
    by_budget: dict[str, list[Job]] = {}
    for job in snap.jobs:
        if job.run is None:
            by_budget.setdefault(job.budget, []).append(job)
    for budget, jobs in by_budget.items():
        available = snap.accounts[budget].balance - promised.get(budget, 0)
        for job in serving_order(jobs):
            price = slice_price(snap, job)
            if job.contract is ContractClass.OPPORTUNISTIC:
                starts[job.id] = None
            elif price <= available:
                available -= price
                starts[job.id] = now + slice_length(snap.policy, job)
            elif job.fallback_opportunistic:
                starts[job.id] = None
            else:
                waiting.add(job.id)
    return starts, waiting


@PROPERTY
@given(funding_edges())
def test_exactly_the_slices_the_money_covers_are_granted(case: Case) -> None:
    d = decide(case)
    want_starts, want_waiting = expected(case)
    got = {s.job_id: s.slice_end for s in d.starts}
    assert got == want_starts
    for s in d.starts:
        assert s.run_class is (RunClass.OPPORTUNISTIC if s.slice_end is None else RunClass.GUARANTEED)
    assert {jid for jid, w in d.pending.items() if w.blocker is Blocker.FUNDS} == want_waiting
    assert set(d.pending) == want_waiting
