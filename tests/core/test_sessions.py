"""Sessions: first in line within their limits, fast through headroom, charged while held, reclaimed when idle."""

from __future__ import annotations

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Blocker, HintKind, PreemptReason
from allotment.core.model import ContractClass, JobKind, RunClass
from tests.core.builders import HOUR, World

decide = AllotmentPolicy().decide
OPP = ContractClass.OPPORTUNISTIC


def world(headroom: int = 8) -> World:
    return (
        World()
        .cluster("c1", nodes=2)
        .budget("org", alloc=2000)
        .budget("red", "org")
        .budget("blue", "org")
        .policy(default_headroom=headroom, session_idle_timeout=HOUR)
    )


def test_batch_work_leaves_the_headroom_free_and_a_session_takes_it_at_once() -> None:
    w = world(headroom=8)
    for i in range(3):
        w.pending(f"b{i}", "blue", gpus=8, submitted_at=i)
    d = decide(w.snapshot(), 0)
    assert [s.job_id for s in d.starts] == ["b0"]  # the second node stays free as headroom
    assert d.pending["b1"].blocker is Blocker.HEADROOM
    w.running("b0", "blue", {"c1-h100-00": 8}, slice_end=HOUR).session("s", "red", gpus=2, submitted_at=5)
    d = decide(w.snapshot(), 10)
    assert [(s.job_id, s.run_class, s.slice_end) for s in d.starts] == [("s", RunClass.SESSION, 10 + 2 * HOUR)]


def test_short_grace_opportunistic_work_may_sit_in_headroom() -> None:
    quick = world(headroom=8).running("b0", "blue", {"c1-h100-00": 8}, slice_end=HOUR)
    quick.pending("quick", "blue", gpus=8, contract=OPP, grace=10)
    assert [s.job_id for s in decide(quick.snapshot(), 0).starts] == ["quick"]
    slow = world(headroom=8).running("b0", "blue", {"c1-h100-00": 8}, slice_end=HOUR)
    slow.pending("slow", "red", gpus=8, contract=OPP, grace=300)
    d = decide(slow.snapshot(), 0)
    assert d.starts == ()
    assert d.pending["slow"].blocker is Blocker.HEADROOM


def test_session_in_a_full_cluster_takes_opportunistic_work_with_notice() -> None:
    w = world(headroom=0)
    w.running("slice", "blue", {"c1-h100-00": 8}, slice_end=HOUR)
    w.running("opp", "blue", {"c1-h100-01": 8}, contract=OPP, grace=20)
    w.session("s", "red", gpus=4)
    d = decide(w.snapshot(), 0)
    assert [(p.job_id, p.reason, p.grace) for p in d.preempts] == [("opp", PreemptReason.FOR_SESSION, 20)]
    assert d.pending["s"].blocker is Blocker.WAITING_FOR_GRACE
    assert d.pending["s"].estimated_start == 20


def test_session_outside_limits_waits_with_the_limits_named() -> None:
    w = world().policy(session_max_gpus=4).session("big", "red", gpus=8)
    reason = decide(w.snapshot(), 0).pending["big"]
    assert reason.blocker is Blocker.SESSION_LIMIT
    assert "4 GPUs" in reason.message


def test_sessions_per_user_are_limited() -> None:
    w = world().policy(session_max_per_user=1)
    w.running("s0", "red", {"c1-h100-00": 1}, slice_end=HOUR, kind=JobKind.SESSION, user="ann")
    w.session("s1", "red", gpus=1, user="ann")
    reason = decide(w.snapshot(), 0).pending["s1"]
    assert reason.blocker is Blocker.SESSION_LIMIT
    assert "1 of 1" in reason.message


def test_idle_session_is_reclaimed_and_not_requeued() -> None:
    w = world().running("s", "red", {"c1-h100-00": 2}, slice_end=5 * HOUR, kind=JobKind.SESSION, idle_since=0)
    d = decide(w.snapshot(), HOUR)
    assert [(p.job_id, p.reason, p.requeue) for p in d.preempts] == [("s", PreemptReason.IDLE_SESSION, False)]


def test_session_ends_with_its_length() -> None:
    w = world().running("s", "red", {"c1-h100-00": 2}, slice_end=2 * HOUR, kind=JobKind.SESSION)
    d = decide(w.snapshot(), 2 * HOUR)
    assert [(p.job_id, p.reason) for p in d.preempts] == [("s", PreemptReason.SESSION_END)]


def test_headroom_refill_leaves_fast_leaving_work_alone() -> None:
    """The headroom cannot be refilled (slice work holds 12 of the 16 GPUs); the fast-leaving job already counts as
    headroom, so preempting it would free nothing sessions could not have anyway (it used to be preempted, started
    again and preempted every cycle)."""
    w = world(headroom=8)
    w.running("slice", "blue", {"c1-h100-00": 8, "c1-h100-01": 4}, slice_end=HOUR)
    w.running("quick", "red", {"c1-h100-01": 3}, contract=OPP, grace=10)
    d = decide(w.snapshot(), 60)
    assert d.preempts == ()


def test_a_session_in_a_full_cluster_of_slice_work_is_told_what_holds_it_not_a_fair_share_turn() -> None:
    w = world(headroom=0)
    w.running("a", "blue", {"c1-h100-00": 8}, slice_end=HOUR)
    w.running("b", "blue", {"c1-h100-01": 8}, slice_end=2 * HOUR)
    w.session("s", "red", gpus=2)
    d = decide(w.snapshot(), 0)
    why = d.pending["s"]
    assert (why.blocker, why.free_gpus, d.preempts) == (Blocker.CAPACITY, 0, ())
    assert "fair-share turn" not in why.message
    assert "a session may take" in why.message and "sessions start first" in why.message
    # the first slice end plus the running job's grace (Job.grace defaults to 60 s)
    assert why.estimated_start == HOUR + 60


def test_a_job_waiting_for_the_session_room_is_not_told_a_smaller_one_would_start() -> None:
    # one node busy, the other free and all of it session room: a 7-GPU job would not start either, so no
    # "with 7 GPUs it could start now" hint (the hint used to ignore the room)
    w = world(headroom=8).running("b0", "blue", {"c1-h100-00": 8}, slice_end=HOUR)
    w.pending("batch", "red", gpus=8, submitted_at=0)
    d = decide(w.snapshot(), 10)
    assert d.pending["batch"].blocker is Blocker.HEADROOM
    assert [h for h in d.pending["batch"].hints if h.kind is HintKind.FEWER_GPUS] == []
