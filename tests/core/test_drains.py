"""Drains without negotiation: nothing new lands, preemptible work leaves now, slices leave at their end."""

from __future__ import annotations

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import PreemptReason
from allotment.core.model import ContractClass, NodeState
from tests.core.builders import HOUR, World
from tests.core.driver import Driver

decide = AllotmentPolicy().decide


def world() -> World:
    return World().cluster("c1", nodes=2).budget("org", alloc=2000).budget("red", "org").budget("blue", "org")


def test_draining_node_sheds_preemptible_work_now_and_slices_at_their_end() -> None:
    w = world()
    w.running("slice", "red", {"c1-h100-00": 4}, started=0, slice_end=2 * HOUR, grace=60)
    w.running("opp", "blue", {"c1-h100-00": 4}, contract=ContractClass.OPPORTUNISTIC, grace=30)
    w.node_state("c1-h100-00", NodeState.DRAINING)
    w.pending("new", "blue", gpus=1)
    d = decide(w.snapshot(), HOUR)
    assert [(p.job_id, p.reason, p.requeue) for p in d.preempts] == [("opp", PreemptReason.DRAIN, True)]
    assert d.drain_estimates == {"c1-h100-00": 2 * HOUR + 60}
    assert all(a.node != "c1-h100-00" for s in d.starts for a in s.placement)


def test_slice_on_a_draining_node_is_not_renewed_and_the_job_leaves() -> None:
    w = world().running("slice", "red", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.node_state("c1-h100-00", NodeState.DRAINING)
    d = decide(w.snapshot(), HOUR)
    assert [lp.why for lp in d.lapses] == ["node draining"]
    assert [(p.job_id, p.reason) for p in d.preempts] == [("slice", PreemptReason.DRAIN)]


def test_drained_node_is_empty_by_its_estimate_and_the_job_moves() -> None:
    w = world().running("slice", "red", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR, grace=60)
    w.node_state("c1-h100-00", NodeState.DRAINING)
    drv = Driver(w.snapshot(), durations={"slice": 10 * HOUR})
    estimate = drv.step(10).drain_estimates["c1-h100-00"]
    drv.run_until(estimate + 120, every=300)
    on_drained = [j for j in drv.jobs.values() if j.run and any(a.node == "c1-h100-00" for a in j.run.placement)]
    assert on_drained == []
    assert drv.jobs["slice"].run is not None
    assert drv.jobs["slice"].run.placement[0].node == "c1-h100-01"


def test_forced_drain_and_lost_node_end_slices_with_a_refund() -> None:
    w = (
        world()
        .running("a", "red", {"c1-h100-00": 8}, slice_end=HOUR)
        .running("b", "blue", {"c1-h100-01": 8}, slice_end=HOUR)
    )
    w.node_state("c1-h100-00", NodeState.DRAINING, forced=True).node_state("c1-h100-01", NodeState.DOWN)
    d = decide(w.snapshot(), 100)
    got = {p.job_id: (p.reason, p.refund, p.grace) for p in d.preempts}
    assert got == {"a": (PreemptReason.FORCED, True, 60), "b": (PreemptReason.NODE_DOWN, True, 0)}


def test_cordoned_node_takes_nothing_new_but_keeps_renewing() -> None:
    w = world().running("slice", "red", {"c1-h100-00": 4}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.node_state("c1-h100-00", NodeState.CORDONED).node_state("c1-h100-01", NodeState.CORDONED)
    w.pending("new", "blue", gpus=1)
    d = decide(w.snapshot(), HOUR)
    assert [r.job_id for r in d.renews] == ["slice"]
    assert d.starts == ()
