"""Planned starts for waiting gangs and the backfill that cannot delay them."""

from __future__ import annotations

from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import Job, ReservationKind
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
