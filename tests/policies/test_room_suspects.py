"""Narrowing the search for room to the suspects (the budgets whose work can be a victim at all) never changes the
room found: every victim the Kueue-like baseline's rules accept belongs to a suspect queue, and `find_room` with the
suspects finds the same nodes and victims as without them."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from allotment.policies.common import Frame, drain_all, end_of_life, pending_jobs
from allotment.policies.kueue import Quotas, Reclaim
from allotment.policies.preempting import find_room
from tests.core.strategies import Case, Knobs, cases

BUSY = Knobs(reservations=False, max_running=16, max_pending=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(BUSY))
def test_every_victim_is_a_suspect_and_the_room_is_the_same(case: Case) -> None:
    snapshot = case.snapshot
    frame = Frame(snapshot, case.now)
    end_of_life(frame)
    drain_all(frame, lambda _job: True)
    quotas = Quotas(frame, snapshot)
    running = [j for j in snapshot.jobs if j.run is not None and j.id in quotas.pool_of]
    for job in pending_jobs(snapshot):
        reclaim = Reclaim(quotas, job)
        for v in running:
            if reclaim.eligible(v):
                assert v.budget in reclaim.suspects(quotas.pool_of[v.id])
        everyone = find_room(frame, job, reclaim.eligible, reclaim.order, {})
        assert find_room(frame, job, reclaim.eligible, reclaim.order, {}, reclaim.suspects) == everyone
