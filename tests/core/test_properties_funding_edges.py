"""Promise 2 at the edge of the money (issue 19): with room for every job, exactly the guaranteed jobs whose whole
slice their budget can still pay for, in the budget's own order, get a slice — one micro short is not enough, and
what one budget or one job shape may afford says nothing about another; a slice shortened to the start of another
budget's window is priced for its shortened length, and refused below `min_slice` (promise 4); the others run
opportunistically when they accept it, or wait for funds or for the window."""

from __future__ import annotations

from hypothesis import given

from allotment.core.decisions import Blocker
from allotment.core.model import ContractClass, Job, RunClass
from tests.core.strategies import PROPERTY, Case, committed, decide
from tests.core.strategies_edges import funding_edges, serving_order, slice_offer


def expected(case: Case) -> tuple[dict[str, int | None], dict[str, Blocker]]:
    """(slice end, or None for an opportunistic start, per job that starts; the blocker of each job that waits)."""
    snap, now = case.snapshot, case.now
    promised = committed(snap, now)
    starts: dict[str, int | None] = {}
    waiting: dict[str, Blocker] = {}
    by_budget: dict[str, list[Job]] = {}
    for job in snap.jobs:
        if job.run is None:
            by_budget.setdefault(job.budget, []).append(job)
    for budget, jobs in by_budget.items():
        available = snap.accounts[budget].balance - promised.get(budget, 0)
        for job in serving_order(jobs):
            offer = slice_offer(snap, job, now)
            if job.contract is ContractClass.OPPORTUNISTIC:
                starts[job.id] = None
            elif offer is not None and offer[1] <= available:
                available -= offer[1]
                starts[job.id] = offer[0]
            elif job.fallback_opportunistic:
                starts[job.id] = None
            else:
                waiting[job.id] = Blocker.WINDOW if offer is None else Blocker.FUNDS
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
    assert {jid: w.blocker for jid, w in d.pending.items()} == want_waiting
