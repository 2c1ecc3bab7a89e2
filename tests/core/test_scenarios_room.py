"""Scenarios of the node-shaped session room (rule `node-shaped-room`, issue 21, decision 54): where recent sessions
asked for a whole node, the room keeps one node able to hold such a session within seconds — batch work does not
take it, the refill frees the node nearest to it, and a slice there lapses instead of renewing. Without a whole-node
room (the shell sized none), the same cluster leaves the 8-GPU session waiting."""

from __future__ import annotations

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import PreemptReason
from allotment.core.model import ContractClass, Job, JobKind, ReservationKind, RunClass
from tests.core.builders import HOUR, World
from tests.core.strategies import CheckedDriver


def _fragmented(whole: int) -> World:
    """Five 8-GPU nodes: node 00 empty, the other four each with 6 GPUs of slice work (2 free): 16 GPUs free."""
    w = World().cluster("c1", nodes=5).budget("red").budget("blue").room("c1", 8, whole)
    for i in range(1, 5):
        w.running(f"slice{i}", "blue", {f"c1-h100-{i:02d}": 6}, started=0, slice_end=6 * HOUR, grace=60)
    return w


@pytest.mark.parametrize(
    ("whole", "batch_starts", "session_starts"),
    [
        pytest.param(8, False, True, id="whole-node-room-keeps-node-00-for-the-session"),
        pytest.param(0, True, False, id="a-room-spread-over-nodes-lets-batch-split-it"),
    ],
)
def test_batch_work_leaves_the_room_node_whole_and_an_8_gpu_session_starts_at_once(
    whole: int, batch_starts: bool, session_starts: bool
) -> None:
    w = _fragmented(whole)
    w.pending("batch", "red", gpus=4, submitted_at=0, slice_seconds=2 * HOUR)
    drv = CheckedDriver(w.snapshot(), {"batch": 4 * HOUR}, 0)
    drv.step(10)
    assert ("batch" in drv.running()) is batch_starts
    drv.submit(Job("sess", "red", "alice", 8, kind=JobKind.SESSION, slice_seconds=HOUR))
    drv.step(20)
    assert ("sess" in drv.running()) is session_starts


def test_the_refill_frees_the_node_nearest_to_whole_of_opportunistic_work() -> None:
    w = World().cluster("c1", nodes=2).budget("red").budget("blue").room("c1", 8, 8)
    w.running("opp", "blue", {"c1-h100-00": 4}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=120)
    w.running("slice", "red", {"c1-h100-01": 4}, started=0, slice_end=6 * HOUR, grace=120)
    d = CheckedDriver(w.snapshot(), {}, 0).step(60)
    # 8 GPUs are free (the room's total is met), but no node has 8: node 00 is the one preemption can empty
    assert [(p.job_id, p.reason) for p in d.preempts] == [("opp", PreemptReason.HEADROOM)]


def test_without_a_whole_node_room_the_refill_leaves_a_met_room_alone() -> None:
    w = World().cluster("c1", nodes=2).budget("red").budget("blue").room("c1", 8, 0)
    w.running("opp", "blue", {"c1-h100-00": 4}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=120)
    w.running("slice", "red", {"c1-h100-01": 4}, started=0, slice_end=6 * HOUR, grace=120)
    assert not CheckedDriver(w.snapshot(), {}, 0).step(60).preempts


def test_a_slice_on_the_room_node_lapses_instead_of_renewing_and_the_other_renews() -> None:
    w = World().cluster("c1", nodes=2).budget("red").budget("blue").room("c1", 4, 8)
    w.running("near", "red", {"c1-h100-00": 4}, started=0, slice_end=HOUR, grace=60)
    w.running("far", "blue", {"c1-h100-01": 8}, started=0, slice_end=HOUR, grace=60)
    d = CheckedDriver(w.snapshot(), {}, 0).step(HOUR)
    assert [lapse.job_id for lapse in d.lapses] == ["near"]
    assert [r.job_id for r in d.renews] == ["far"]
    assert [p.job_id for p in d.preempts] == ["near"]  # then the refill empties the node for the next session


def test_five_whole_node_sessions_one_after_another_each_start_at_once_while_a_gang_keeps_its_plan() -> None:
    """Issue 21's live scenario in the core: a full cluster, an 8-GPU guaranteed job waiting with a planned start,
    and five 8-GPU sessions asked for one after another (each released before the next)."""
    w = World().cluster("c1", nodes=4).budget("red").budget("blue").room("c1", 8, 8)
    for i in range(3):
        w.running(f"slice{i}", "blue", {f"c1-h100-{i + 1:02d}": 8}, started=0, slice_end=(i + 1) * HOUR, grace=60)
    w.pending("big", "red", gpus=8, submitted_at=0, slice_seconds=2 * HOUR)
    durations = {f"slice{i}": 10 * HOUR for i in range(3)}
    drv = CheckedDriver(w.snapshot(), durations, 0)
    d = drv.step(10)
    plan = next(r for r in d.reserves if r.job_id == "big")
    for n in range(5):
        at = 600 + n * 1200
        drv.run_until(at, every=300)
        drv.submit(Job(f"sess{n}", "red", "alice", 8, kind=JobKind.SESSION, slice_seconds=HOUR), duration=300)
        drv.step(at + 1)
        assert drv.started_at(f"sess{n}") == at + 1, drv.last.pending.get(f"sess{n}") if drv.last else None
    drv.run_until(plan.planned_start + 300, every=300)
    began = drv.started_at("big")
    assert began is not None and began <= plan.planned_start


@pytest.mark.parametrize(
    ("room", "claims"),
    [
        pytest.param(5, False, id="the-claim-would-take-the-fast-leaving-work-beside-the-victim-from-a-met-room"),
        pytest.param(3, True, id="a-room-the-claim-leaves-whole"),
    ],
)
def test_a_preemption_claim_takes_the_nodes_whole_part_of_the_room(room: int, claims: bool) -> None:
    """A preemptor's reservation claims its node, and a claimed node is no part of the room: the claim takes all the
    node's free and fast-leaving GPUs from the room, not only those its victims free. The victim here is slow-leaving
    slice-expired work (4 GPUs) beside 2 GPUs of fast-leaving opportunistic work too few to free the 4 asked for; the
    room counts those 2 and node 01's 3 free GPUs (5). (A planned start may still claim the node when the victim's
    notice ends, as the cluster's plans may: §8.)"""
    now = 10 * HOUR
    w = World().cluster("c1", nodes=2).budget("red").budget("blue").room("c1", room)
    w.running("opp", "blue", {"c1-h100-00": 2}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=0)
    w.running(
        "expired",
        "blue",
        {"c1-h100-00": 4},
        started=now - HOUR,
        slice_end=now - HOUR // 2,
        run_class=RunClass.OPPORTUNISTIC,
        grace=60,
    )
    w.running("inside", "blue", {"c1-h100-00": 2}, started=now - HOUR, slice_end=now + 6 * HOUR, grace=60)
    w.running("slice", "blue", {"c1-h100-01": 5}, started=now - HOUR, slice_end=now + 6 * HOUR, grace=60)
    w.pending("g", "red", gpus=4, submitted_at=now - 60, slice_seconds=HOUR)
    d = CheckedDriver(w.snapshot(), {}, now).step(now)
    fair_share = [p.job_id for p in d.preempts if p.reason is PreemptReason.FAIR_SHARE]
    assert fair_share == (["expired"] if claims else [])
    assert [r.job_id for r in d.reserves if r.kind is ReservationKind.PREEMPTION] == (["g"] if claims else [])


def test_a_preemption_claim_never_takes_the_room_node() -> None:
    """Rule `node-shaped-room` for GPUs reserved by preemption. Node 00's 8 GPUs are being freed (a session told to
    leave now), so it is the room node: the one node a whole-node session could start on. Nodes 01 and 02 hold
    6 and 2 GPUs of slice work, so the room (their 8 free GPUs) is exactly met and red's 1-GPU job may not take one.
    Nor may it reserve node 00's GPUs being freed: a claimed node is never the room node, so the claim would take the
    whole node from the room for 1 GPU (a property test found the case). Nor may its planned start count node 00's
    GPUs being freed: a plan for now would start there the next cycle (another property case). It plans on node 01,
    for when the slice there ends."""
    now = 10 * HOUR
    w = World().cluster("c1", nodes=3).budget("red").budget("blue").room("c1", 8, whole=8)
    w.running(
        "going", "blue", {"c1-h100-00": 8}, started=now - HOUR, slice_end=now + HOUR, kind=JobKind.SESSION,
        leaving_until=now, grace=0,
    )  # fmt: skip
    w.running("six", "blue", {"c1-h100-01": 6}, started=now - HOUR, slice_end=now + 6 * HOUR, grace=60)
    w.running("two", "blue", {"c1-h100-02": 2}, started=now - HOUR, slice_end=now + 6 * HOUR, grace=60)
    d = AllotmentPolicy().decide(w.pending("small", "red", gpus=1, submitted_at=now - 60).snapshot(), now)
    assert d.starts == ()
    assert [r.job_id for r in d.reserves if r.kind is ReservationKind.PREEMPTION] == []
    assert [(r.job_id, r.nodes, r.planned_start) for r in d.reserves] == [
        ("small", (("c1-h100-01", 1),), now + 6 * HOUR + 60)
    ]
