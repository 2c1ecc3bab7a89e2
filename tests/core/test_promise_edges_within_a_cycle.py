"""The promises where the cycle's own earlier decisions matter (issue 19): cases the mutation run's last survivors
showed no test for. Each table row is a small world built with tests/core/builders.py and the one decision the
promises allow on it.

Money spent earlier in the same cycle (promise 2: a slice only if its budget can pay for all of it); a job passed
over on the fast path with exactly a slice's money, and jobs of one shape passed over while a later start fills
their budget's GPU limit (their wait reasons, promise 10); the victims of a gang chosen across pools by fewest GPUs,
then least lost progress, with victim-free nodes costing nothing, and no victim where a cancelled job's GPUs cover
the need; a slice on one of two pools whose windows start at different times (never running into the window of its
own pool), two budgets' windows on one pool, and a session and a batch job before one window; jobs of one slice
length on two GPU types; a planned start behind slice-expired work, which counts it as leaving only once its notice
would end; and the session room a second plan must leave after a carried reservation was taken up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from allotment.core.decisions import Blocker, PreemptReason
from allotment.core.model import Account, Reservation, ReservationKind
from tests.core.builders import HOUR, World
from tests.core.test_promise_boundaries import (
    NODE,
    ONE_SLICE,
    OPP,
    Funding,
    Preemptions,
    decide,
    one_node,
)
from tests.core.test_promise_boundaries import test_preemptions_at_the_edges as check_preemptions
from tests.core.test_promise_boundaries import test_slices_at_the_edges_of_the_money as check_slices

CHEAP = "T4"
CHEAP_RATE = 2
"""Micro-credits per GPU-hour: a 1-GPU slice of half an hour (min_slice) costs exactly 1 micro-credit."""


def _gang_across_pools(whole_node_started: int) -> Callable[[], World]:
    """A 3×8 gang at t=5000 on one of two 3-node clusters. c1: two free nodes and one 8-GPU job (8 GPUs to take);
    c2: a 4-, a 2- and a 2-GPU job on three nodes (8 GPUs too), losing 1000 + 900 + 800 = 2700 s of work. Equal GPUs:
    the pool whose victims lose less goes, and c1's free nodes add nothing to its cost."""

    def world() -> World:
        w = World().cluster("c1", nodes=3).cluster("c2", nodes=3).budget("red").budget("blue")
        w.running("c1-whole", "blue", {"c1-h100-02": 8}, started=whole_node_started, contract=OPP)
        w.running("c2-four", "blue", {"c2-h100-00": 4}, started=4000, contract=OPP)
        w.running("c2-two-a", "blue", {"c2-h100-01": 2}, started=4100, contract=OPP)
        w.running("c2-two-b", "blue", {"c2-h100-02": 2}, started=4200, contract=OPP)
        return w.pending("gang", "red", gpus=8, replicas=3, submitted_at=0)

    return world


def _a_cancelled_job_frees_what_is_needed() -> World:
    # blue's in-slice job on node 0 is cancelled (told to leave, 60 s grace); node 1 holds opportunistic work. The
    # GPUs being freed on node 0 cover red's need: nobody else is preempted
    w = World().cluster("c1", nodes=2).budget("red").budget("blue")
    w.running("cancelled", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR, grace=60, cancel_requested=True)
    w.running("opp", "blue", {"c1-h100-01": 8}, started=0, contract=OPP)
    return w.pending("want", "red", gpus=8, submitted_at=0)


def test_no_victim_where_a_cancelled_jobs_gpus_cover_the_need() -> None:
    """Cancelling is the owner's choice (not promise 1's concern); the GPUs it frees count as leaving: red's start is
    reserved on them for when the cancelled job's grace ends."""
    d = decide(_a_cancelled_job_frees_what_is_needed().snapshot(), 100)
    assert [(p.job_id, p.reason) for p in d.preempts] == [("cancelled", PreemptReason.CANCELLED)]
    assert [(r.job_id, r.nodes, r.planned_start) for r in d.reserves] == [("want", ((NODE, 8),), 160)]


C2_VICTIMS = [(j, PreemptReason.FOR_GUARANTEED) for j in ("c2-four", "c2-two-a", "c2-two-b")]

PREEMPTIONS = [
    Preemptions("gang-free-nodes-cost-nothing-more-lost", _gang_across_pools(5000 - 2701), 5000, C2_VICTIMS),
    Preemptions("gang-free-nodes-cost-nothing-less-lost", _gang_across_pools(5000 - 2699), 5000,
                [("c1-whole", PreemptReason.FOR_GUARANTEED)]),
]  # fmt: skip


@pytest.mark.parametrize("case", PREEMPTIONS, ids=str)
def test_gang_victims_across_pools(case: Preemptions) -> None:
    check_preemptions(case)


def _passed_over_with_exactly_a_slices_money() -> World:
    # the node is held inside a slice; red's first job tries preemption and planning, so its second one (2 GPUs,
    # 2 credits: all red has) is passed over on the fast path — it waits for GPUs, not for money
    w = one_node("red", "blue", red=2)
    w.running("in-slice", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR)
    w.pending("first", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)
    return w.pending("second", "red", gpus=2, slice_seconds=HOUR, submitted_at=1)


def _one_micro_spent_earlier_in_the_cycle() -> World:
    # red has exactly one 1-GPU H100 slice's money. Its first job is funded but cannot start (c1's free GPUs are all
    # session headroom); its tiny job then starts on c0 for 1 micro-credit; its last job, of the first one's shape,
    # is now one micro short
    w = World().cluster("c1", nodes=1).cluster("c0", nodes=1, gpu_type=CHEAP).policy(headroom={"c1": 8})
    w.rates[CHEAP] = CHEAP_RATE
    w.budget("red")
    w.accounts["red"] = Account(ONE_SLICE, 0.0)
    w.pending("first", "red", gpus=1, slice_seconds=HOUR, submitted_at=0, priority=2, gpu_types=("H100",))
    w.pending("tiny", "red", gpus=1, slice_seconds=1800, submitted_at=0, priority=1, gpu_types=(CHEAP,))
    return w.pending("last", "red", gpus=1, slice_seconds=HOUR, submitted_at=0, gpu_types=("H100",))


def _limit_reached_later_in_the_cycle() -> World:
    # red may hold 16 GPUs. Its whole-node job gets the planned start; its two 2×8 gangs are passed over (no two
    # whole nodes free); its 4-GPU job then starts. Holding 4, red has no room under its limit for either gang: both
    # wait for the limit, alike
    w = World().cluster("c1", nodes=2).budget("red", max_gpus=16).budget("blue")
    w.running("blue-0", "blue", {"c1-h100-00": 4}, started=0, slice_end=5 * HOUR)
    w.running("blue-1", "blue", {"c1-h100-01": 4}, started=0, slice_end=5 * HOUR)
    w.pending("whole-node", "red", gpus=8, submitted_at=0, priority=3)
    w.pending("gang-a", "red", gpus=8, replicas=2, submitted_at=0, priority=2)
    w.pending("gang-b", "red", gpus=8, replicas=2, submitted_at=0, priority=1)
    return w.pending("half-node", "red", gpus=4, submitted_at=0)


def _two_window_owners_on_one_pool(soon: str, later: str) -> Callable[[], World]:
    """Two budgets each own a 4-GPU window on one 8-GPU node, `soon`'s from 1000 s on, `later`'s from 2 h on; each
    asks for 6 GPUs for 4 hours. A budget's own window never constrains it, the other's does: `soon`'s job gets a
    slice ending at `later`'s window, `later`'s job none (the other window leaves 4 GPUs in 1000 s, less than
    min_slice)."""

    def world() -> World:
        w = World().cluster("c1", nodes=1).budget(soon).budget(later)
        w.window("w-soon", soon, "c1", gpus=4, start=100 + 1000, end=100 + 10 * HOUR)
        w.window("w-later", later, "c1", gpus=4, start=100 + 2 * HOUR, end=100 + 10 * HOUR)
        w.pending("soon-job", soon, gpus=6, slice_seconds=4 * HOUR, submitted_at=0)
        return w.pending("later-job", later, gpus=6, slice_seconds=4 * HOUR, submitted_at=0)

    return world


def _a_session_and_a_batch_job_before_a_window() -> World:
    # another budget's window takes the node in an hour: the batch slice is shortened to it, the session (never
    # shortened) cannot start
    w = one_node("red", "win").window("w1", "win", "c1", gpus=8, start=100 + HOUR, end=100 + 10 * HOUR)
    w.session("s", "red", gpus=1, length=2 * HOUR, submitted_at=0)
    return w.pending("a", "red", gpus=1, slice_seconds=2 * HOUR, submitted_at=1)


FUNDING = [
    Funding("passed-over-with-exactly-a-slices-money", _passed_over_with_exactly_a_slices_money, 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.CAPACITY}),
    Funding("one-micro-spent-earlier-in-the-cycle", _one_micro_spent_earlier_in_the_cycle, 100, {"tiny": 100 + 1800},
            {"first": Blocker.HEADROOM, "last": Blocker.FUNDS}),
    Funding("limit-reached-later-in-the-cycle", _limit_reached_later_in_the_cycle, 100, {"half-node": 100 + HOUR},
            {"whole-node": Blocker.CAPACITY, "gang-a": Blocker.LIMIT, "gang-b": Blocker.LIMIT}),
    Funding("two-window-owners-a-first", _two_window_owners_on_one_pool("win-a", "win-b"), 100,
            {"soon-job": 100 + 2 * HOUR}, {"later-job": Blocker.WINDOW}),
    Funding("two-window-owners-b-first", _two_window_owners_on_one_pool("win-b", "win-a"), 100,
            {"soon-job": 100 + 2 * HOUR}, {"later-job": Blocker.WINDOW}),
    Funding("a-session-and-a-batch-job-before-a-window", _a_session_and_a_batch_job_before_a_window, 100,
            {"a": 100 + HOUR}, {"s": Blocker.WINDOW}),
]  # fmt: skip


@pytest.mark.parametrize("case", FUNDING, ids=str)
def test_slices_and_blockers_after_earlier_decisions_in_the_cycle(case: Funding) -> None:
    check_slices(case)


@dataclass(frozen=True)
class TwoWindows:
    """Another budget's windows take all of c1 from `c1_from` and all of c2 from `c2_from`; red asks for 4 hours.
    One window starts too soon for a minimum slice: red gets the other pool, its slice ending at that pool's
    window."""

    name: str
    c1_from: int
    c2_from: int
    cluster: str
    slice_end: int

    def __str__(self) -> str:
        return self.name


TWO_WINDOWS = [
    TwoWindows("c1-window-too-soon", 100 + 1000, 100 + 2 * HOUR, "c2", 100 + 2 * HOUR),
    TwoWindows("c2-window-too-soon", 100 + 2 * HOUR, 100 + 1000, "c1", 100 + 2 * HOUR),
]


@pytest.mark.parametrize("case", TWO_WINDOWS, ids=str)
def test_a_slice_never_runs_into_its_own_pools_window(case: TwoWindows) -> None:
    w = World().cluster("c1", nodes=1).cluster("c2", nodes=1).budget("red").budget("win")
    w.window("w1", "win", "c1", gpus=8, start=case.c1_from, end=case.c1_from + 10 * HOUR)
    w.window("w2", "win", "c2", gpus=8, start=case.c2_from, end=case.c2_from + 10 * HOUR)
    snap = w.pending("a", "red", gpus=1, slice_seconds=4 * HOUR, submitted_at=0).snapshot()
    cluster_of = {n.name: n.cluster for n in snap.nodes}
    (start,) = decide(snap, 100).starts
    assert (start.job_id, start.slice_end) == ("a", case.slice_end)
    assert [cluster_of[a.node] for a in start.placement] == [case.cluster]


@pytest.mark.parametrize("grace", [0, 600], ids=["no-grace", "ten-minutes-grace"])
def test_a_planned_start_behind_slice_expired_work_waits_out_its_notice(grace: int) -> None:
    """Blue's job ended its slice 2 h ago and cannot renew (no money); red's job has waited past starvation_after,
    so the work gives way to red's planned start: it is told to leave now, and the start is planned for when its
    notice ends — now plus its grace, not its old slice end plus grace."""
    now = 3 * HOUR
    w = one_node("red", "blue", blue=0).policy(starvation_after=HOUR)
    w.running("expired", "blue", {NODE: 8}, started=0, slice_end=HOUR, grace=grace)
    d = decide(w.pending("want", "red", gpus=8, submitted_at=0).snapshot(), now)
    assert [(p.job_id, p.reason, p.grace) for p in d.preempts] == [("expired", PreemptReason.RESERVATION, grace)]
    assert [(r.job_id, r.planned_start) for r in d.reserves] == [("want", now + grace)]


def test_a_second_plan_leaves_the_session_room_after_a_carried_one_started() -> None:
    """Rule `plans-leave-session-room` on a 2-node cluster with 8 GPUs of headroom: red's carried reservation on
    node 0 is taken up (red starts there), blue then gets the cluster's first new plan, and yellow none — the one
    unclaimed node left is the session room."""
    now = 2 * HOUR
    w = World().cluster("c1", nodes=2).policy(headroom={"c1": 8}, starvation_after=HOUR)
    for b in ("red", "green", "blue", "yellow"):
        w.budget(b)
    w.pending("held", "red", gpus=8, submitted_at=0)
    w.reserve(Reservation("held", ((NODE, 8),), now, ReservationKind.PLANNED, since=0))
    w.running("green-slice", "green", {"c1-h100-01": 8}, started=0, slice_end=3 * HOUR)
    w.pending("blue-job", "blue", gpus=8, submitted_at=0)
    d = decide(w.pending("yellow-job", "yellow", gpus=8, submitted_at=1).snapshot(), now)
    assert [(s.job_id, s.slice_end) for s in d.starts] == [("held", now + HOUR)]
    assert [r.job_id for r in d.reserves] == ["blue-job"]
    assert d.pending["yellow-job"].blocker is Blocker.CAPACITY


def test_a_planned_start_counts_slice_expired_work_as_leaving_only_after_its_notice() -> None:
    """Blue's 4-GPU job ended its slice 2 h ago, with 10 minutes' grace; green's 4-GPU slice ends in 5 minutes. Red
    (waiting past starvation_after) needs 4 GPUs: green's slice end comes first, so red's start is planned for it
    and nobody is told to leave — the expired job could be gone only 10 minutes from now, not at once."""
    now = 3 * HOUR
    w = one_node("red", "blue", "green", blue=0).policy(starvation_after=HOUR)
    w.running("expired", "blue", {NODE: 4}, started=0, slice_end=HOUR, grace=600)
    w.running("ending", "green", {NODE: 4}, started=0, slice_end=now + 300, grace=0)
    d = decide(w.pending("want", "red", gpus=4, submitted_at=0).snapshot(), now)
    assert d.preempts == ()
    assert [(r.job_id, r.planned_start) for r in d.reserves] == [("want", now + 300)]


def test_jobs_of_one_slice_length_on_different_gpu_types_keep_their_own_pools() -> None:
    """Two jobs of one budget and one slice length, one asking for H100, the other for B200: each starts on a node
    of the GPU type it asked for."""
    w = World().cluster("c1", nodes=1).cluster("c2", nodes=1, gpu_type="B200").budget("red")
    w.pending("h100", "red", gpus=1, slice_seconds=HOUR, submitted_at=0, gpu_types=("H100",))
    snap = w.pending("b200", "red", gpus=1, slice_seconds=HOUR, submitted_at=1, gpu_types=("B200",)).snapshot()
    type_of = {n.name: n.gpu_type for n in snap.nodes}
    d = decide(snap, 100)
    assert {s.job_id: [type_of[a.node] for a in s.placement] for s in d.starts} == {"h100": ["H100"], "b200": ["B200"]}
