"""Preemption with notice and the anti-thrash rules."""

from __future__ import annotations

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import PreemptReason
from allotment.core.model import ContractClass, Reservation, ReservationKind, RunClass
from allotment.core.preemption import reasons_that_may_take
from tests.core.builders import HOUR, World, two_team_world

decide = AllotmentPolicy().decide
OPP = ContractClass.OPPORTUNISTIC


def full_one_node() -> World:
    return World().cluster("c1", nodes=1).budget("org", alloc=2000).budget("red", "org").budget("blue", "org")


def test_never_a_job_inside_its_slice() -> None:
    w = full_one_node().running("in-slice", "blue", {"c1-h100-00": 8}, slice_end=2 * HOUR)
    w.pending("want", "red", gpus=8).session("s", "red", gpus=1)
    d = decide(w.snapshot(), 100)
    assert d.preempts == ()
    assert d.starts == ()


def test_opportunistic_work_yields_to_guaranteed_work() -> None:
    w = full_one_node().running("opp", "blue", {"c1-h100-00": 8}, contract=OPP, grace=30)
    w.pending("want", "red", gpus=8)
    d = decide(w.snapshot(), 100)
    assert [(p.job_id, p.reason, p.grace, p.preemptor) for p in d.preempts] == [
        ("opp", PreemptReason.FOR_GUARANTEED, 30, "want")
    ]
    (res,) = d.reserves
    assert res.job_id == "want" and res.kind is ReservationKind.PREEMPTION and res.planned_start == 130


def test_fewest_gpus_then_least_lost_progress() -> None:
    w = full_one_node()
    w.running("old4", "blue", {"c1-h100-00": 4}, started=0, contract=OPP)
    w.running("new2", "blue", {"c1-h100-00": 2}, started=90, contract=OPP)
    w.running("old2", "blue", {"c1-h100-00": 2}, started=10, contract=OPP)
    w.pending("want", "red", gpus=2)
    d = decide(w.snapshot(), 100)
    assert [p.job_id for p in d.preempts] == ["new2"]


def test_expired_work_is_taken_only_for_an_under_share_budget() -> None:
    # blue has used a lot (over its share) and holds the node with a lapsed slice; red has used nothing
    w = (
        World()
        .cluster("c1", nodes=1)
        .budget("org", alloc=2000)
        .budget("red", "org", usage=0.0)
        .budget("blue", "org", usage=5000.0)
    )
    w.running("lapsed", "blue", {"c1-h100-00": 8}, started=0, slice_end=50, run_class=RunClass.OPPORTUNISTIC)
    w.pending("want", "red", gpus=8)
    d = decide(w.snapshot(), 100)
    assert [(p.job_id, p.reason) for p in d.preempts] == [("lapsed", PreemptReason.FAIR_SHARE)]


def test_expired_work_of_an_under_share_budget_is_kept() -> None:
    # now red is the heavy user: blue's lapsed job would leave blue below its share, so red must wait for it
    w = (
        World()
        .cluster("c1", nodes=1)
        .budget("org", alloc=2000)
        .budget("red", "org", usage=5000.0)
        .budget("blue", "org", usage=0.0)
    )
    w.running("lapsed", "blue", {"c1-h100-00": 8}, started=0, slice_end=50, run_class=RunClass.OPPORTUNISTIC)
    w.pending("want", "red", gpus=8)
    d = decide(w.snapshot(), 100)
    assert all(p.reason is not PreemptReason.FAIR_SHARE for p in d.preempts)


def test_never_a_preemption_that_does_not_let_the_preemptor_start() -> None:
    # 8-GPU job; the node holds 4 opportunistic + 4 inside a slice: freeing the 4 would not be enough
    w = full_one_node()
    w.running("opp", "blue", {"c1-h100-00": 4}, contract=OPP)
    w.running("slice", "blue", {"c1-h100-00": 4}, slice_end=10 * HOUR)
    w.pending("want", "red", gpus=8)
    d = decide(w.snapshot(), 100)
    assert d.preempts == ()


def test_gpus_being_freed_are_kept_for_their_preemptor() -> None:
    w = full_one_node().running("opp", "blue", {"c1-h100-00": 8}, contract=OPP, leaving_until=200)
    w.reserve(Reservation("first", (("c1-h100-00", 8),), 200, ReservationKind.PREEMPTION, since=140))
    w.pending("first", "red", gpus=8, submitted_at=50).pending("other", "blue", gpus=8, priority=100, submitted_at=0)
    d = decide(w.snapshot(), 150)
    assert [r.job_id for r in d.reserves if r.kind is ReservationKind.PREEMPTION] == ["first"]
    assert d.preempts == ()


def test_two_budgets_cannot_preempt_each_other_in_a_loop() -> None:
    # after red takes the node from blue (fair share), blue, now under its share, finds red inside its slice
    world = two_team_world(nodes=1)
    world.budgets = []
    world.budget("org", alloc=2000).budget("red", "org", usage=0.0).budget("blue", "org", usage=5000.0)
    world.running("lapsed", "blue", {"c1-h100-00": 8}, started=0, slice_end=50, run_class=RunClass.OPPORTUNISTIC)
    world.pending("want", "red", gpus=8)
    from tests.core.driver import Driver

    drv = Driver(world.snapshot(), durations={"want": 10 * HOUR, "lapsed": 100 * HOUR})
    drv.step(100)
    drv.run_until(6 * HOUR, every=600)
    preempted = [e.job for e in drv.events("preempt")]
    assert preempted == ["lapsed"]


def test_a_planned_start_blocks_renewal_of_the_slices_it_waits_for() -> None:
    # blue has used the node for an hour already, red nothing: handing it over lowers the larger standing
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000).budget("red", "org").budget("blue", "org", usage=8.0)
    w.running("r", "blue", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.pending("gang", "red", gpus=8)
    w.reserve(Reservation("gang", (("c1-h100-00", 8),), HOUR + 60, ReservationKind.PLANNED, since=HOUR - 60))
    d = decide(w.snapshot(), HOUR)
    assert d.renews == ()
    assert [lp.job_id for lp in d.lapses] == ["r"]
    assert [(p.job_id, p.reason, p.preemptor) for p in d.preempts] == [("r", PreemptReason.RESERVATION, "gang")]
    (res,) = d.reserves
    assert res.planned_start == HOUR + 60


def test_a_planned_start_does_not_take_from_a_budget_it_does_not_out_rank() -> None:
    # red has the larger history: blue's slice renews, red keeps waiting (no planned start from blue's GPUs)
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000).budget("red", "org", usage=50.0).budget("blue", "org")
    w.running("r", "blue", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.pending("gang", "red", gpus=8, submitted_at=HOUR - 60)
    w.reserve(Reservation("gang", (("c1-h100-00", 8),), HOUR + 60, ReservationKind.PLANNED, since=HOUR - 60))
    d = decide(w.snapshot(), HOUR)
    assert [r.job_id for r in d.renews] == ["r"]
    assert d.preempts == ()


def test_a_starving_job_out_ranks_everyone_at_slice_ends() -> None:
    # red has waited 30 h, past a starvation bound of a day
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000).budget("red", "org", usage=50.0).budget("blue", "org")
    w.policy(starvation_after=24 * HOUR)
    w.running("r", "blue", {"c1-h100-00": 8}, started=0, slice_end=30 * HOUR, slice_seconds=HOUR)
    w.pending("gang", "red", gpus=8, submitted_at=0)
    w.reserve(Reservation("gang", (("c1-h100-00", 8),), 30 * HOUR + 60, ReservationKind.PLANNED))
    d = decide(w.snapshot(), 30 * HOUR)
    assert d.renews == ()
    assert [p.reason for p in d.preempts] == [PreemptReason.RESERVATION]


@pytest.mark.parametrize(
    ("opportunistic", "expired", "includes", "excludes"),
    [
        pytest.param(True, False, PreemptReason.FOR_GUARANTEED, PreemptReason.FAIR_SHARE, id="opportunistic"),
        pytest.param(False, True, PreemptReason.FAIR_SHARE, PreemptReason.FOR_GUARANTEED, id="slice-expired"),
    ],
)
def test_what_may_take_a_run_follows_the_rules(
    opportunistic: bool, expired: bool, includes: PreemptReason, excludes: PreemptReason
) -> None:
    reasons = reasons_that_may_take(opportunistic=opportunistic, slice_expired=expired)
    assert includes in reasons and excludes not in reasons
    assert {PreemptReason.FOR_SESSION, PreemptReason.WINDOW, PreemptReason.RESERVATION} <= set(reasons)


def test_nothing_may_take_a_run_inside_its_slice() -> None:
    assert reasons_that_may_take(opportunistic=False, slice_expired=False) == ()
