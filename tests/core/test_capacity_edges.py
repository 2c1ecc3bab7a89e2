"""The promises where the cycle's working picture of the fleet (core/capacity.py) must stay exact (issue 19): cases the
mutation run over capacity.py showed no test for. Each table row is a small world built with tests/core/builders.py
and the one decision the promises allow on it.

What starts: the last free GPU of a node, a node of a pool whose nodes differ in size, a gang on the one cluster with
enough nodes, free GPUs beside work reported on GPUs another job holds; the session headroom at exactly
`headroom_max_grace`; a slice shortened to a window whose room counts only ready and cordoned nodes; slice-expired
work found as a fair-share victim after its node changed earlier in the cycle; the wait reasons of gangs passed over
after one of their shape started, and of jobs larger than some or all nodes; the fewer-GPUs hint after GPUs were
taken; plans that tell work to leave, with the session room they leave; a plan counting work started on its node
earlier in the cycle; and a negative grace clamped to no notice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from allotment.core.decisions import Blocker, HintKind, PreemptReason
from allotment.core.model import NodeState
from tests.core.builders import HOUR, World
from tests.core.test_promise_boundaries import NODE, OPP, Funding, Preemptions, decide, one_node
from tests.core.test_promise_boundaries import test_preemptions_at_the_edges as check_preemptions
from tests.core.test_promise_boundaries import test_slices_at_the_edges_of_the_money as check_slices

NODE_1 = "c1-h100-01"


def _resized(w: World, name: str, gpus: int) -> World:
    w.nodes = [replace(n, gpus=gpus) if n.name == name else n for n in w.nodes]
    return w


# -- what starts -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Starts:
    """A world and the nodes each started job is placed on (every other job waits)."""

    name: str
    world: Callable[[], World]
    placed: dict[str, list[str]]

    def __str__(self) -> str:
        return self.name


def _the_last_free_gpu() -> World:
    w = one_node("red", "blue")
    w.running("in-slice", "blue", {NODE: 7}, started=0, slice_end=5 * HOUR)
    return w.pending("one", "red", gpus=1, submitted_at=0)


def _a_larger_node_in_a_pool_of_mixed_sizes() -> World:
    # c1's H100 pool holds a 4-GPU and an 8-GPU node: an 8-GPU job fits the larger one
    w = _resized(World().cluster("c1", nodes=2).budget("red"), NODE, 4)
    return w.pending("eight", "red", gpus=8, submitted_at=0)


def _a_smaller_ready_node_beside_a_down_larger_one() -> World:
    # the 8-GPU node is down, the 4-GPU one ready: the 8-GPU job (considered first) fits nowhere, the 4-GPU job does
    w = World().cluster("c1", nodes=2).budget("red").node_state(NODE, NodeState.DOWN)
    _resized(w, NODE_1, 4).pending("eight", "red", gpus=8, submitted_at=0, priority=1)
    return w.pending("four", "red", gpus=4, submitted_at=0)


def _a_gang_on_the_cluster_with_enough_nodes() -> World:
    # c1 (one node, preferred by name) can never hold a 2×8 gang; c2 (two nodes) can
    w = World().cluster("c1", nodes=1).cluster("c2", nodes=2).budget("red")
    return w.pending("gang", "red", gpus=8, replicas=2, submitted_at=0)


def double_booked(want: int) -> World:
    """One node where the executor reports two of blue's opportunistic jobs on GPUs 0-3, and red wants `want` GPUs."""
    w = one_node("red", "blue")
    held: dict[str, tuple[int, ...]] = {NODE: (0, 1, 2, 3)}
    w.running("x", "blue", held, started=0, contract=OPP)
    w.running("y", "blue", held, started=0, contract=OPP)
    return w.pending("want", "red", gpus=want, submitted_at=0)


def _free_gpus_beside_double_booked_ones() -> World:
    # GPUs 4-7 are still free beside the double-booked ones, and a 4-GPU job starts there
    return double_booked(4)


STARTS = [
    Starts("the-last-free-gpu", _the_last_free_gpu, {"one": [NODE]}),
    Starts("a-larger-node-in-a-pool-of-mixed-sizes", _a_larger_node_in_a_pool_of_mixed_sizes, {"eight": [NODE_1]}),
    Starts("a-smaller-ready-node-beside-a-down-larger-one", _a_smaller_ready_node_beside_a_down_larger_one,
           {"four": [NODE_1]}),
    Starts("a-gang-on-the-cluster-with-enough-nodes", _a_gang_on_the_cluster_with_enough_nodes,
           {"gang": ["c2-h100-00", "c2-h100-01"]}),
    Starts("free-gpus-beside-double-booked-ones", _free_gpus_beside_double_booked_ones, {"want": [NODE]}),
]  # fmt: skip


@pytest.mark.parametrize("case", STARTS, ids=str)
def test_what_starts_on_the_fleet_as_it_is(case: Starts) -> None:
    d = decide(case.world().snapshot(), 100)
    assert {s.job_id: [a.node for a in s.placement] for s in d.starts} == case.placed


@pytest.mark.parametrize(
    ("grace", "started", "victims"),
    [
        pytest.param(30, {"want": [NODE_1]}, [], id="grace-exactly-headroom-max-grace"),
        pytest.param(31, {}, [("opp", PreemptReason.FOR_GUARANTEED)], id="grace-one-second-longer"),
    ],
)
def test_fast_leaving_work_counts_as_session_headroom_up_to_headroom_max_grace(
    grace: int, started: dict[str, list[str]], victims: list[tuple[str, PreemptReason]]
) -> None:
    """Rule `session-headroom` with 8 GPUs of headroom on two nodes: node 0 holds opportunistic work, node 1 is free.
    Work whose grace is at most headroom_max_grace (30 s) leaves within seconds and counts as headroom, so red's
    8-GPU job starts on the free node; with one second more it does not, and red's job preempts it instead."""
    w = World().cluster("c1", nodes=2).policy(headroom={"c1": 8}).budget("red").budget("blue")
    w.running("opp", "blue", {NODE: 8}, started=0, contract=OPP, grace=grace)
    d = decide(w.pending("want", "red", gpus=8, submitted_at=0).snapshot(), 100)
    placed = {s.job_id: [a.node for a in s.placement] for s in d.starts}
    assert (placed, [(p.job_id, p.reason) for p in d.preempts]) == (started, victims)


@pytest.mark.parametrize(
    "state",
    [pytest.param(NodeState.DRAINING, id="draining"), pytest.param(NodeState.DOWN, id="down")],
)
def test_a_window_keeps_its_room_on_the_ready_nodes_only(state: NodeState) -> None:
    """Rule `capacity-windows`: another budget's window books 8 GPUs of c1 from 1 h on. Of c1's two nodes one is
    draining (or down) and takes nothing: the window needs the whole ready node, so red's 4-hour slice there ends at
    the window's start."""
    w = World().cluster("c1", nodes=2).budget("red").budget("win").node_state(NODE_1, state)
    w.window("w1", "win", "c1", gpus=8, start=100 + HOUR, end=100 + 10 * HOUR)
    (start,) = decide(w.pending("a", "red", gpus=1, slice_seconds=4 * HOUR, submitted_at=0).snapshot(), 100).starts
    assert (start.job_id, start.slice_end) == ("a", 100 + HOUR)


# -- slice-expired work as a fair-share victim after its node changed ------------------------------------------------


def _far_over_its_share() -> World:
    """Blue is far over its share and cannot renew (half a credit); red has used nothing: at 2 h red may take blue's
    slice-expired work for fair share (rule `preempt-for-guaranteed`)."""
    w = World().cluster("c1", nodes=1).budget("org", alloc=3000)
    return w.budget("red", "org").budget("blue", "org", balance=0.5, usage=5000).budget("green", "org")


def _expired_beside_an_in_slice_job() -> World:
    w = _far_over_its_share()
    w.running("expired", "blue", {NODE: 1}, started=0, slice_end=HOUR)
    w.running("in-slice", "blue", {NODE: 7}, started=0, slice_end=5 * HOUR)
    return w.pending("want", "red", gpus=1, submitted_at=0)


def _expired_after_a_session_took_the_free_gpus() -> World:
    # sessions go first: green's takes the node's two free GPUs, then red needs the expired job's one
    w = _far_over_its_share()
    w.running("expired", "blue", {NODE: 1}, started=0, slice_end=HOUR)
    w.running("in-slice", "blue", {NODE: 5}, started=0, slice_end=5 * HOUR)
    w.session("s", "green", gpus=2, submitted_at=0)
    return w.pending("want", "red", gpus=1, submitted_at=0)


def _expired_beside_a_renewed_slice() -> World:
    # both slices end at 1 h: green's is renewed, blue's (no money) is not, and red takes it
    w = _far_over_its_share()
    w.running("renewed", "green", {NODE: 4}, started=0, slice_end=HOUR)
    w.running("expired", "blue", {NODE: 4}, started=0, slice_end=HOUR)
    return w.pending("want", "red", gpus=4, submitted_at=0)


FAIR_SHARE = [("expired", PreemptReason.FAIR_SHARE)]

PREEMPTIONS = [
    Preemptions("expired-beside-an-in-slice-job", _expired_beside_an_in_slice_job, 2 * HOUR, FAIR_SHARE),
    Preemptions("expired-after-a-session-took-the-free-gpus", _expired_after_a_session_took_the_free_gpus, 2 * HOUR,
                FAIR_SHARE),
    Preemptions("expired-beside-a-renewed-slice", _expired_beside_a_renewed_slice, HOUR, FAIR_SHARE),
]  # fmt: skip


@pytest.mark.parametrize("case", PREEMPTIONS, ids=str)
def test_slice_expired_work_is_a_fair_share_victim_whatever_changed_on_its_node(case: Preemptions) -> None:
    check_preemptions(case)


# -- wait reasons --------------------------------------------------------------------------------------------------


def _gangs_passed_over_after_one_of_their_shape_started() -> World:
    # red may hold 32 GPUs. Its 3×8 gang tries preemption and planning (none possible: blue's work is in its slice);
    # its first 2×8 gang then starts on the two free nodes, so the other two are passed over; its 4-GPU job starts
    # last. Holding 20, red has no room under its limit for either: both wait for the limit, alike
    w = World().cluster("c1", nodes=3).budget("red", max_gpus=32).budget("blue")
    w.running("blue-2", "blue", {"c1-h100-02": 4}, started=0, slice_end=5 * HOUR)
    w.pending("three-nodes", "red", gpus=8, replicas=3, submitted_at=0, priority=4)
    for i, priority in enumerate((3, 2, 1)):
        w.pending(f"gang-{i}", "red", gpus=8, replicas=2, submitted_at=0, priority=priority)
    return w.pending("half-node", "red", gpus=4, submitted_at=0)


def _larger_than_one_pools_nodes() -> World:
    # c1's node is held inside a slice, c2's one node has 4 GPUs, all free. Red's first 8-GPU job tries preemption
    # and planning; its second is then passed over on the fast path: it fits c1's nodes only, and waits for GPUs
    w = World().cluster("c1", nodes=1).cluster("c2", nodes=1, gpus=4).budget("red").budget("blue")
    w.running("in-slice", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR)
    w.pending("first", "red", gpus=8, submitted_at=0, priority=1)
    return w.pending("second", "red", gpus=8, submitted_at=0)


def _larger_than_every_node() -> World:
    # the same on c1 alone, the second job asking for 16 GPUs on one node: no node can ever hold it
    w = one_node("red", "blue")
    w.running("in-slice", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR)
    w.pending("first", "red", gpus=8, submitted_at=0, priority=1)
    return w.pending("second", "red", gpus=16, submitted_at=0)


FUNDING = [
    Funding("gangs-passed-over-after-one-of-their-shape-started", _gangs_passed_over_after_one_of_their_shape_started,
            100, {"gang-0": 100 + HOUR, "half-node": 100 + HOUR},
            {"three-nodes": Blocker.CAPACITY, "gang-1": Blocker.LIMIT, "gang-2": Blocker.LIMIT}),
    Funding("larger-than-one-pools-nodes", _larger_than_one_pools_nodes, 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.CAPACITY}),
    Funding("larger-than-every-node", _larger_than_every_node, 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.NO_POOL}),
]  # fmt: skip


@pytest.mark.parametrize("case", FUNDING, ids=str)
def test_wait_reasons_on_the_fleet_as_it_is(case: Funding) -> None:
    check_slices(case)


def _half_the_node_taken_earlier_in_the_cycle() -> World:
    w = one_node("red").pending("four", "red", gpus=4, submitted_at=0, priority=1)
    return w.pending("six", "red", gpus=6, submitted_at=0)


def _no_gpu_free() -> World:
    w = one_node("red", "blue")
    w.running("in-slice", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR)
    return w.pending("six", "red", gpus=6, submitted_at=0)


@pytest.mark.parametrize(
    ("world", "hints"),
    [
        pytest.param(_half_the_node_taken_earlier_in_the_cycle, ["with 4 GPUs it could start now"],
                     id="half-the-node-taken-earlier-in-the-cycle"),
        pytest.param(_no_gpu_free, [], id="no-gpu-free"),
    ],
)  # fmt: skip
def test_the_fewer_gpus_hint_counts_the_gpus_free_now(world: Callable[[], World], hints: list[str]) -> None:
    """Rule `explain-waiting`: the fewer-GPUs hint says how many GPUs would start now — the most any node has free
    after the cycle's starts, and no hint when no GPU is free."""
    reason = decide(world().snapshot(), 100).pending["six"]
    assert [h.detail for h in reason.hints if h.kind is HintKind.FEWER_GPUS] == hints


# -- planned starts ------------------------------------------------------------------------------------------------


def test_two_plans_that_tell_work_to_leave_still_leave_the_session_room() -> None:
    """Rule `plans-leave-session-room` on a 3-node cluster with 8 GPUs of headroom. Nodes 0 and 1 hold slice-expired
    work of two budgets that cannot renew (one job each, so neither is a fair-share victim); red and green wait past
    starvation_after. Each gets a planned start on one of them, the work there told to leave for it (its notice
    ends at the planned start); node 2, free, is the session room the two plans leave unclaimed."""
    now = 3 * HOUR
    w = World().cluster("c1", nodes=3).policy(headroom={"c1": 8}, starvation_after=HOUR)
    w.budget("red").budget("green").budget("blue", balance=0).budget("yellow", balance=0)
    w.running("exp-0", "blue", {NODE: 8}, started=0, slice_end=HOUR, grace=600)
    w.running("exp-1", "yellow", {NODE_1: 8}, started=0, slice_end=HOUR, grace=600)
    w.pending("red-job", "red", gpus=8, submitted_at=0)
    d = decide(w.pending("green-job", "green", gpus=8, submitted_at=0).snapshot(), now)
    assert sorted((r.job_id, r.planned_start) for r in d.reserves) == [("green-job", now + 600), ("red-job", now + 600)]


def test_a_plan_counts_work_started_on_its_node_earlier_in_the_cycle() -> None:
    """Rule `planned-start`, with everyone waiting past starvation_after. Node 0: blue's 4-GPU slice ends in 4 h, 4
    GPUs free; node 1: blue's 8-GPU slice ends in 3 h. Red's plan takes node 1; green's 1-hour job then starts on
    node 0's free GPUs; yellow's plan is on node 0, when both its jobs have left — green's too, started in this
    cycle. (No wait on checkpoints: with one, red would rather wait an hour for node 0, whose 4-GPU job loses less
    than node 1's 8-GPU one — test_checkpoints.py.)"""
    now = 3 * HOUR
    w = World().cluster("c1", nodes=2).policy(starvation_after=HOUR, checkpoint_wait=0)
    w.budget("red").budget("green", usage=1.0).budget("yellow", usage=2.0).budget("blue")
    w.running("blue-0", "blue", {NODE: 4}, started=0, slice_end=now + 4 * HOUR, grace=0)
    w.running("blue-1", "blue", {NODE_1: 8}, started=0, slice_end=now + 3 * HOUR, grace=0)
    w.pending("red-job", "red", gpus=8, submitted_at=0)
    w.pending("green-job", "green", gpus=4, slice_seconds=HOUR, submitted_at=0)
    d = decide(w.pending("yellow-job", "yellow", gpus=8, submitted_at=0).snapshot(), now)
    assert [(r.job_id, r.nodes, r.planned_start) for r in d.reserves] == [
        ("red-job", ((NODE_1, 8),), now + 3 * HOUR),
        ("yellow-job", ((NODE, 8),), now + 4 * HOUR),
    ]


# -- grace ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("grace", "notice"),
    [
        pytest.param(-30, 0, id="negative-grace-no-notice"),
        pytest.param(0, 0, id="no-grace"),
        pytest.param(900, 600, id="grace-beyond-max-grace"),
    ],
)
def test_a_cancelled_jobs_notice_is_its_grace_clamped_to_zero_and_max_grace(grace: int, notice: int) -> None:
    """Cancellation (core/cancellation.py): the running job is told to leave with its owner's grace, clamped by the
    rule every preemption uses — never below zero, never beyond max_grace (600 s)."""
    w = one_node("blue").running("c", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR, grace=grace,
                                  cancel_requested=True)  # fmt: skip
    d = decide(w.snapshot(), 100)
    assert [(p.job_id, p.reason, p.grace) for p in d.preempts] == [("c", PreemptReason.CANCELLED, notice)]
