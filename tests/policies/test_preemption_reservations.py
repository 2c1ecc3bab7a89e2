"""A job that preempted keeps the GPUs its victims free (a preemption reservation, like kube-scheduler's nominated
node): it starts there once they are free, nobody else takes them meanwhile, and it preempts nothing more."""

from __future__ import annotations

import pytest

from allotment.core.model import Reservation, ReservationKind, RunClass
from tests.core.builders import two_team_world
from tests.policies.helpers import decide

N0, N1 = "c1-h100-00", "c1-h100-01"


def held_for(job: str, since: int = 50) -> Reservation:
    return Reservation(job, ((N0, 8),), 130, ReservationKind.PREEMPTION, since)


@pytest.mark.parametrize("policy", ["priority", "kueue"])
def test_the_preemptor_starts_on_the_freed_gpus_before_anyone_else(policy: str) -> None:
    w = two_team_world(2).running("busy", "red", {N1: 8}, run_class=RunClass.GUARANTEED)
    w.pending("other", "red", 8, submitted_at=0, priority=9).pending("preemptor", "blue", 8, submitted_at=5)
    out = decide(policy, w.reserve(held_for("preemptor")))
    assert out.started == {"preemptor": (N0,)}
    assert out.blocker("other") in ("capacity", "waiting-for-grace")


@pytest.mark.parametrize("policy", ["priority", "kueue"])
def test_while_victims_leave_the_preemptor_keeps_its_claim_and_preempts_nothing_more(policy: str) -> None:
    w = two_team_world(2)
    w.running("victim", "red", {N0: 8}, run_class=RunClass.OPPORTUNISTIC, leaving_until=130)
    w.running("other", "red", {N1: 8}, run_class=RunClass.OPPORTUNISTIC)
    w.pending("preemptor", "blue", 8, priority=5).reserve(held_for("preemptor"))
    out = decide(policy, w)
    assert out.started == {} and out.preempted == {}
    assert out.planned == {"preemptor": 130}
    assert out.decisions.reserves[0].since == 50
    assert out.blocker("preemptor") == "waiting-for-grace"
