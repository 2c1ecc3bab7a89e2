"""Planned starts for waiting gangs and the backfill that cannot delay them."""

from __future__ import annotations

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Blocker
from allotment.core.model import ContractClass, Job, JobKind, Reservation, ReservationKind
from tests.core.builders import HOUR, World
from tests.core.driver import Driver

decide = AllotmentPolicy().decide


def busy_world() -> World:
    # 4 nodes, each with one 8-GPU job inside a slice ending at 1, 2, 3 and 4 hours; "big" has used a lot
    w = World().cluster("c1", nodes=4, rack_size=4).budget("org", alloc=4000)
    w.budget("big", "org", usage=500.0).budget("gang", "org").budget("small", "org")
    for i in range(4):
        w.running(f"r{i}", "big", {f"c1-h100-{i:02d}": 8}, started=0, slice_end=(i + 1) * HOUR, slice_seconds=HOUR)
    return w


def test_a_waiting_gang_gets_a_planned_start_from_known_slice_ends() -> None:
    w = busy_world().pending("g", "gang", gpus=8, replicas=2)
    d = decide(w.snapshot(), 60)
    (res,) = d.reserves
    assert res.kind is ReservationKind.PLANNED
    assert sorted(n for n, _ in res.nodes) == ["c1-h100-00", "c1-h100-01"]
    assert res.planned_start == 2 * HOUR + 60  # the later slice end plus its grace
    assert d.pending["g"].estimated_start == res.planned_start


def test_backfill_cannot_delay_the_planned_start() -> None:
    w = busy_world().pending("g", "gang", gpus=8, replicas=2)
    durations = {f"r{i}": 10 * HOUR for i in range(4)} | {"g": HOUR, "r0": HOUR}
    drv = Driver(w.snapshot(), durations=durations)
    planned = drv.step(60).reserves[0].planned_start
    # r0 finishes at 1 h; a small job arriving then may only use node 00 with a slice ending in time
    drv.run_until(HOUR + 120, every=300)
    drv.submit(Job("s", "small", "u", 8, slice_seconds=4 * HOUR), duration=4 * HOUR)
    d = drv.step(HOUR + 180)
    (start,) = [s for s in d.starts if s.job_id == "s"]
    assert start.placement[0].node == "c1-h100-00"
    assert start.slice_end is not None and start.slice_end + 60 <= planned
    drv.run_until(planned + 60, every=300)
    assert drv.started_at("g") == planned
    assert drv.reservations.get("g") is None


def test_a_slice_that_ends_in_time_is_renewed_under_the_plan() -> None:
    w = busy_world().pending("g", "gang", gpus=8, replicas=2)
    drv = Driver(w.snapshot(), durations={f"r{i}": 10 * HOUR for i in range(4)})
    planned = drv.step(60).reserves[0].planned_start
    d = drv.step(HOUR)
    # r0's next slice (1 h) still ends by the planned start minus its grace: renewing it delays nothing
    assert [(r.job_id, r.slice_end) for r in d.renews] == [("r0", planned - 60)]


def test_the_gang_starts_by_its_planned_start() -> None:
    w = busy_world().pending("g", "gang", gpus=8, replicas=2)
    durations = {f"r{i}": 10 * HOUR for i in range(4)} | {"g": HOUR}
    drv = Driver(w.snapshot(), durations=durations)
    planned = drv.step(60).reserves[0].planned_start
    drv.run_until(planned + 60, every=600)
    assert drv.started_at("g") == planned


def _long_slices_world() -> World:
    """busy_world, but r0 renews for two hours at a time: renewed past the plan, it would push the plan back."""
    w = World().cluster("c1", nodes=4, rack_size=4).budget("org", alloc=4000)
    w.budget("big", "org", usage=500.0).budget("gang", "org").budget("small", "org")
    for i in range(4):
        length = 2 * HOUR if i == 0 else HOUR
        w.running(f"r{i}", "big", {f"c1-h100-{i:02d}": 8}, started=0, slice_end=(i + 1) * HOUR, slice_seconds=length)
    return w


def test_a_plan_is_kept_behind_a_job_no_pool_can_hold() -> None:
    """The budget's first job by priority asks for more nodes than the fleet has, so it can never hold a plan: it
    does not take the budget's plan from the job that holds it, the slice ending under the plan is not renewed past
    it, and the job starts by its first planned start."""
    w = _long_slices_world().pending("g", "gang", gpus=8, replicas=2)
    w.pending("huge", "gang", gpus=8, replicas=8, priority=5)
    drv = Driver(w.snapshot(), durations={f"r{i}": 10 * HOUR for i in range(4)} | {"g": HOUR})
    (first,) = drv.step(60).reserves
    assert first.job_id == "g"
    for t in (HOUR, HOUR + 300, 2 * HOUR):
        d = drv.step(t)
        if drv.started_at("g") is not None:
            break
        assert [(r.job_id, r.planned_start, r.since) for r in d.reserves] == [("g", first.planned_start, 60)]
        assert all(r.slice_end + 60 <= first.planned_start for r in d.renews if r.job_id == "r0")
    drv.run_until(first.planned_start + 60, every=300)
    assert drv.started_at("g") == first.planned_start


def test_a_plan_is_kept_while_the_budgets_first_job_waits_for_gpus_being_freed() -> None:
    """The budget's first job took opportunistic work by preemption and waits for its grace (its own reservation);
    the plan of the budget's next job is kept meanwhile, not dropped and made again. (`other` is above its share, so
    its opportunistic work yields to guaranteed work: rule `opportunistic-entitlement`.)"""
    w = World().cluster("c1", nodes=3, rack_size=3).budget("org", alloc=3000)
    w.budget("big", "org", usage=500.0).budget("gang", "org").budget("other", "org", usage=5000.0)
    w.running("opp", "other", {"c1-h100-00": 8}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=300)
    w.running("r1", "big", {"c1-h100-01": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.running("r2", "big", {"c1-h100-02": 8}, started=0, slice_end=2 * HOUR, slice_seconds=HOUR)
    w.pending("first", "gang", gpus=8, priority=5).pending("g", "gang", gpus=8, replicas=2)
    drv = Driver(w.snapshot(), durations={"r1": 10 * HOUR, "r2": 10 * HOUR, "first": HOUR, "g": HOUR})
    d = drv.step(60)
    assert [(r.job_id, r.kind, r.planned_start) for r in d.reserves] == [("first", ReservationKind.PREEMPTION, 360)]
    d = drv.step(120)
    (plan,) = [r for r in d.reserves if r.job_id == "g"]
    assert plan.kind is ReservationKind.PLANNED and "first" in drv.reservations
    for t in (180, 240):
        d = drv.step(t)
        assert [(r.job_id, r.planned_start, r.since) for r in d.reserves if r.job_id == "g"] == [
            ("g", plan.planned_start, 120)
        ]


def test_opportunistic_work_on_a_planned_node_leaves_in_time_not_at_once() -> None:
    """An opportunistic sweep on one of a gang's planned nodes is told to leave when its notice would end at the
    planned start, not as soon as the plan is made: told at once, its GPUs would idle for an hour and the backfill
    rule would hand them straight back to it (a start/preempt loop every cycle)."""
    w = World().cluster("c1", nodes=2, rack_size=2).budget("org", alloc=2000)
    w.budget("big", "org", usage=5000.0).budget("gang", "org").budget("sweeps", "org")
    w.running("r0", "big", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.running("sweep", "sweeps", {"c1-h100-01": 8}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=120)
    w.pending("g", "gang", gpus=8, replicas=2)
    drv = Driver(w.snapshot(), durations={"r0": 10 * HOUR, "sweep": 10 * HOUR, "g": HOUR})
    d = drv.step(60)
    (plan,) = d.reserves
    assert plan.planned_start == HOUR + 60 and not d.preempts
    for t in range(360, plan.planned_start - 120, 300):
        assert not drv.step(t).preempts  # the sweep keeps running, no loop
    d = drv.step(plan.planned_start - 120)
    assert [(p.job_id, p.reason.value) for p in d.preempts] == [("sweep", "reservation")]
    drv.run_until(plan.planned_start + 60, every=60)
    assert drv.started_at("g") == plan.planned_start
    assert [e.job for e in drv.events("start")] == ["g"]  # the sweep was never restarted in between


def test_a_plan_does_not_evict_long_notice_work_it_does_not_need() -> None:
    """The plan counts on a 2-GPU slice that ends at 600 s; the job beside it, running without a slice with 600 s of
    notice, is not needed and keeps running. At its slice end the slice work is not renewed but told to leave, and
    the job starts on time."""
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000)
    w.budget("big", "org", usage=5000.0).budget("gang", "org")
    w.running("r0", "big", {"c1-h100-00": 2}, started=0, slice_end=600, slice_seconds=600, grace=60)
    w.running("opp", "big", {"c1-h100-00": 6}, started=0, fallback_opportunistic=True, grace=600)
    w.pending("g", "gang", gpus=2)
    w.reserve(Reservation("g", (("c1-h100-00", 2),), 660, ReservationKind.PLANNED, since=60))
    drv = Driver(w.snapshot(), durations={"r0": 10 * HOUR, "opp": 10 * HOUR, "g": HOUR})
    d = drv.step(120)
    assert [(r.job_id, r.planned_start) for r in d.reserves] == [("g", 660)] and not d.preempts
    d = drv.step(600)
    assert [(p.job_id, p.reason.value) for p in d.preempts] == [("r0", "reservation")] and not d.renews
    drv.run_until(700, every=60)
    assert drv.started_at("g") == 660
    assert "opp" not in [e.job for e in drv.events("killed")]


def test_a_plan_leaves_the_session_headroom_to_sessions() -> None:
    """With 8 GPUs of session headroom, the node held by a fast-leaving sweep is the headroom: the gang's plan takes
    the node whose slice ends in an hour instead (not the sweep's, though it would free sooner), and a session asked
    for after the plan still starts at once by taking the sweep's GPUs."""
    w = World().cluster("c1", nodes=2).budget("org", alloc=2000).policy(default_headroom=8)
    w.budget("big", "org", usage=5000.0).budget("gang", "org").budget("sweeps", "org").budget("people", "org")
    w.running("r0", "big", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.running("sweep", "sweeps", {"c1-h100-01": 8}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=10)
    w.pending("g", "gang", gpus=8)
    drv = Driver(w.snapshot(), durations={"r0": 10 * HOUR, "sweep": 10 * HOUR, "g": HOUR, "s": HOUR})
    d = drv.step(60)
    assert [(r.job_id, r.nodes, r.planned_start) for r in d.reserves] == [("g", (("c1-h100-00", 8),), HOUR + 60)]
    assert not d.preempts
    drv.submit(Job("s", "people", "ann", 4, kind=JobKind.SESSION, slice_seconds=HOUR))
    d = drv.step(120)
    assert [(p.job_id, p.reason.value) for p in d.preempts] == [("sweep", "for-session")]
    drv.run_until(200, every=10)
    assert drv.started_at("s") == 130


def test_a_job_held_back_by_a_plan_is_not_told_it_starts_now() -> None:
    # r0 finishes at 1 h and leaves node 00 free, claimed by the gang's plan (2 h + 60 s). Two jobs of one budget
    # asked for 15 minutes before the plan can no longer get a slice of the minimum length there: the first gets
    # the budget's own plan, the second waits for the reserved GPUs, and its estimate is no earlier than the
    # planned start (it used to read "in 0 s": the free GPUs it cannot have)
    w = busy_world().pending("g", "gang", gpus=8, replicas=2)
    drv = Driver(w.snapshot(), durations={f"r{i}": 10 * HOUR for i in range(4)} | {"g": HOUR, "r0": HOUR})
    planned = drv.step(60).reserves[0].planned_start
    drv.run_until(planned - 15 * 60, every=300)
    for jid in ("s", "t"):
        drv.submit(Job(jid, "small", "u", 8, slice_seconds=4 * HOUR), duration=4 * HOUR)
    d = drv.step(drv.now + 1)
    why = d.pending["t"]
    assert why.blocker is Blocker.RESERVED
    assert why.estimated_start is not None and why.estimated_start >= planned, why
