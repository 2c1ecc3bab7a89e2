"""Narrowing the search for room to the suspects (the budgets whose work can be a victim at all) never changes the
room found: every victim the Kueue-like baseline's rules accept belongs to a suspect queue, and `find_room` with the
suspects, and with the lookout that visits only nodes with free or leaving GPUs or suspects' work, finds the same
nodes and victims as without them — all through a cycle in which jobs start and victims are told to leave."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from allotment.core.decisions import PreemptReason
from allotment.policies.common import Frame, drain_all, end_of_life, pending_jobs
from allotment.policies.kueue import Quotas, Reclaim
from allotment.policies.preempting import Lookout, find_room, take_room
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
    lookout = Lookout(frame)
    promised: dict[int, int] = {}
    running = [j for j in snapshot.jobs if j.run is not None and j.id in quotas.pool_of]
    for job in pending_jobs(snapshot):
        placement = frame.place_now(job)
        if placement is not None:
            frame.start(job, placement, "test")
            quotas.add(job.budget, placement.pool, placement.gpus)
            continue
        reclaim = Reclaim(quotas, job)
        for v in running:
            if reclaim.eligible(v):
                assert v.budget in reclaim.suspects(quotas.pool_of[v.id])
        everyone = find_room(frame, job, reclaim.eligible, reclaim.order, promised)
        assert find_room(frame, job, reclaim.eligible, reclaim.order, promised, reclaim.suspects) == everyone
        narrowed = find_room(frame, job, reclaim.eligible, reclaim.order, promised, reclaim.suspects, lookout)
        assert narrowed == everyone
        if everyone is not None:
            take_room(frame, job, everyone, PreemptReason.FAIR_SHARE, promised)
            for v in everyone.victims:
                if v.run is not None:
                    quotas.add(v.budget, quotas.pool_of[v.id], -v.run.gpu_count)
            quotas.add(job.budget, everyone.pool, sum(g for _, g in everyone.nodes))
