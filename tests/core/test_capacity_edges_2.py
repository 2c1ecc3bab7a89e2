"""More promises where the cycle's working picture of the fleet (core/capacity.py) must stay exact (issue 19): cases a
second reading of the mutation run over capacity.py showed no test for. Each table row is a small world built with
tests/core/builders.py and the one decision the promises allow on it.

What starts: a job on a pool of 1-GPU nodes, a gang holding two replicas on each node, a 1-GPU job beside work
reported on GPUs another job holds (a node whose reach is larger than the node); a fair-share victim that is the one
slice-expired GPU left on its node after the other expired work there was renewed; the session room the second plan
of a cluster leaves when the headroom is not a whole number of nodes, and the first new plan after a carried one was
taken up; and the wait reasons of jobs of one shape, passed over before and after GPUs were taken in the cycle.
"""

from __future__ import annotations

import pytest

from allotment.core.decisions import Blocker
from allotment.core.model import Reservation, ReservationKind
from tests.core.builders import HOUR, World
from tests.core.test_capacity_edges import FAIR_SHARE, NODE_1, Starts, _far_over_its_share, double_booked
from tests.core.test_capacity_edges import test_what_starts_on_the_fleet_as_it_is as check_starts
from tests.core.test_promise_boundaries import NODE, Funding, Preemptions, decide
from tests.core.test_promise_boundaries import test_preemptions_at_the_edges as check_preemptions
from tests.core.test_promise_boundaries import test_slices_at_the_edges_of_the_money as check_slices

# -- what starts -------------------------------------------------------------------------------------------------


def _a_pool_of_one_gpu_nodes() -> World:
    w = World().cluster("c1", nodes=2, gpus=1).budget("red")
    return w.pending("one", "red", gpus=1, submitted_at=0)


def _a_gang_of_two_replicas_per_node() -> World:
    # four 4-GPU replicas fill two 8-GPU nodes, two on each
    w = World().cluster("c1", nodes=2).budget("red")
    return w.pending("gang", "red", gpus=4, replicas=4, submitted_at=0)


def _one_gpu_beside_double_booked_ones() -> World:
    # the executor reports two 4-GPU jobs on GPUs 0-3: the node's reach (4 free, 8 preemptible) is 12, more than its
    # 8 GPUs, and stays so after a 1-GPU job starts on GPU 4
    return double_booked(1)


STARTS = [
    Starts("a-pool-of-one-gpu-nodes", _a_pool_of_one_gpu_nodes, {"one": ["c1-h100-00"]}),
    Starts("a-gang-of-two-replicas-per-node", _a_gang_of_two_replicas_per_node, {"gang": [NODE, NODE_1]}),
    Starts("one-gpu-beside-double-booked-ones", _one_gpu_beside_double_booked_ones, {"want": [NODE]}),
]


@pytest.mark.parametrize("case", STARTS, ids=str)
def test_what_starts_on_fleets_of_unusual_shapes(case: Starts) -> None:
    check_starts(case)


# -- slice-expired work as a fair-share victim -------------------------------------------------------------------


def _one_expired_gpu_beside_a_renewed_slice() -> World:
    # both slices end at 1 h: green's 7 GPUs are renewed, blue's one (no money) is not, and red takes it
    w = _far_over_its_share()
    w.running("renewed", "green", {NODE: 7}, started=0, slice_end=HOUR)
    w.running("expired", "blue", {NODE: 1}, started=0, slice_end=HOUR)
    return w.pending("want", "red", gpus=1, submitted_at=0)


@pytest.mark.parametrize(
    "case",
    [Preemptions("one-expired-gpu-beside-a-renewed-slice", _one_expired_gpu_beside_a_renewed_slice, HOUR, FAIR_SHARE)],
    ids=str,
)
def test_the_last_slice_expired_gpu_of_a_node_is_still_a_fair_share_victim(case: Preemptions) -> None:
    check_preemptions(case)


# -- planned starts ------------------------------------------------------------------------------------------------


def test_the_second_plan_leaves_a_headroom_of_one_gpu_unclaimed() -> None:
    """Rule `plans-leave-session-room` on a 2-node cluster with 1 GPU of headroom, both nodes held inside slices
    and red and green waiting past starvation_after for 8 GPUs each. The first plan may claim any part of the
    headroom; the second would leave no GPU unclaimed, so there is none."""
    now = 2 * HOUR
    w = World().cluster("c1", nodes=2).policy(headroom={"c1": 1}, starvation_after=HOUR)
    w.budget("red").budget("green").budget("blue")
    w.running("blue-0", "blue", {NODE: 8}, started=0, slice_end=4 * HOUR)
    w.running("blue-1", "blue", {NODE_1: 8}, started=0, slice_end=5 * HOUR)
    w.pending("red-job", "red", gpus=8, submitted_at=0)
    d = decide(w.pending("green-job", "green", gpus=8, submitted_at=0).snapshot(), now)
    assert [(r.job_id, r.nodes) for r in d.reserves] == [("green-job", ((NODE, 8),))]
    assert d.pending["red-job"].blocker is Blocker.CAPACITY


def test_the_first_new_plan_after_a_carried_one_started_may_claim_the_session_room() -> None:
    """Rule `plans-leave-session-room` on a 2-node cluster with 8 GPUs of headroom: red's carried reservation on
    node 0 is taken up (red starts there), so no plan claims a node of the cluster any more. Blue's 2×8 gang then
    makes the cluster's first new plan, which may claim the whole cluster, session headroom included."""
    now = 2 * HOUR
    w = World().cluster("c1", nodes=2).policy(headroom={"c1": 8}, starvation_after=HOUR)
    w.budget("red").budget("green").budget("blue")
    w.pending("held", "red", gpus=8, submitted_at=0)
    w.reserve(Reservation("held", ((NODE, 8),), now, ReservationKind.PLANNED, since=0))
    w.running("green-slice", "green", {NODE_1: 8}, started=0, slice_end=3 * HOUR)
    d = decide(w.pending("blue-gang", "blue", gpus=8, replicas=2, submitted_at=0).snapshot(), now)
    assert [s.job_id for s in d.starts] == ["held"]
    assert [(r.job_id, r.nodes) for r in d.reserves] == [("blue-gang", ((NODE, 8), (NODE_1, 8)))]


# -- wait reasons ----------------------------------------------------------------------------------------------------


def _fleet_for_red_at_most_16() -> World:
    # red may hold 16 GPUs. c1: node 0 free, node 1 half held inside a slice; c2: one node held inside a slice. Red's
    # first job asks for c2 only: it tries preemption and planning (and gets the plan), so red's later jobs that
    # cannot fit in free GPUs are passed over and explained at the end of the cycle
    w = World().cluster("c1", nodes=2).cluster("c2", nodes=1).budget("red", max_gpus=16).budget("blue")
    w.running("blue-c1", "blue", {NODE_1: 4}, started=0, slice_end=5 * HOUR)
    w.running("blue-c2", "blue", {"c2-h100-00": 8}, started=0, slice_end=5 * HOUR)
    return w.pending("on-c2", "red", gpus=8, submitted_at=0, priority=9, clusters=("c2",))


def _gangs_beside_one_whole_free_node() -> World:
    # no pool has the two whole free nodes a 2×8 gang needs, before or after the 8-GPU job takes c1's free node:
    # both gangs are passed over, and, red holding 8 at the end, both wait for the limit, alike
    w = _fleet_for_red_at_most_16()
    w.pending("gang-a", "red", gpus=8, replicas=2, submitted_at=0, priority=3)
    w.pending("whole-node", "red", gpus=8, submitted_at=0, priority=2)
    return w.pending("gang-b", "red", gpus=8, replicas=2, submitted_at=0, priority=1)


def _jobs_of_one_shape_after_one_of_them_started() -> World:
    # the first 8-GPU job takes c1's free node; the other two then fit nowhere in free GPUs and are passed over
    # (the 4-GPU job between them takes node 1's free half). Red holding 12 at the end, both wait for the limit
    w = _fleet_for_red_at_most_16()
    w.pending("eight-a", "red", gpus=8, submitted_at=0, priority=4)
    w.pending("eight-b", "red", gpus=8, submitted_at=0, priority=3)
    w.pending("half-node", "red", gpus=4, submitted_at=0, priority=2)
    return w.pending("eight-c", "red", gpus=8, submitted_at=0, priority=1)


def _a_job_no_node_can_hold_beside_its_budgets_limit() -> World:
    # a 16-GPU job on 8-GPU nodes can never run, whatever red's limit does: after red's 8- and 4-GPU jobs start
    # (12 of its 16), it waits for NO_POOL, not for the limit, on either path through the cycle
    w = _fleet_for_red_at_most_16()
    w.pending("eight", "red", gpus=8, submitted_at=0, priority=3)
    w.pending("four", "red", gpus=4, submitted_at=0, priority=2)
    return w.pending("huge", "red", gpus=16, submitted_at=0, priority=1)


FUNDING = [
    Funding("gangs-beside-one-whole-free-node", _gangs_beside_one_whole_free_node, 100, {"whole-node": 100 + HOUR},
            {"on-c2": Blocker.CAPACITY, "gang-a": Blocker.LIMIT, "gang-b": Blocker.LIMIT}),
    Funding("jobs-of-one-shape-after-one-of-them-started", _jobs_of_one_shape_after_one_of_them_started, 100,
            {"eight-a": 100 + HOUR, "half-node": 100 + HOUR},
            {"on-c2": Blocker.CAPACITY, "eight-b": Blocker.LIMIT, "eight-c": Blocker.LIMIT}),
    Funding("a-job-no-node-can-hold-beside-its-budgets-limit", _a_job_no_node_can_hold_beside_its_budgets_limit, 100,
            {"eight": 100 + HOUR, "four": 100 + HOUR}, {"on-c2": Blocker.CAPACITY, "huge": Blocker.NO_POOL}),
]  # fmt: skip


@pytest.mark.parametrize("case", FUNDING, ids=str)
def test_jobs_of_one_shape_passed_over_in_one_cycle_wait_alike(case: Funding) -> None:
    check_slices(case)
