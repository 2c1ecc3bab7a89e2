"""Multi-round scenarios, part 1: how work flows through a full cluster — finishing jobs and backfill, a 4-node gang
waiting behind small jobs, and a session arriving into a full cluster. Each runs the Driver over simulated time."""

from __future__ import annotations

from allotment.core.decisions import Blocker
from allotment.core.model import ContractClass, Job, JobKind
from tests.core.builders import HOUR, World
from tests.core.strategies import CheckedDriver


def test_finishing_jobs_make_room_and_waiting_jobs_backfill_at_once() -> None:
    w = World().cluster("c1", nodes=2).budget("red")
    for i in range(4):
        w.pending(f"r{i}", "red", gpus=4, submitted_at=0, slice_seconds=2 * HOUR)
    w.pending("late", "red", gpus=4, submitted_at=10, slice_seconds=2 * HOUR)
    drv = CheckedDriver(w.snapshot(), {"r0": 1200, "r1": 3000, "r2": 5000, "r3": 5000, "late": 600}, 0)
    drv.step(1)
    assert drv.running() == {"r0", "r1", "r2", "r3"}
    assert drv.last is not None and drv.last.pending["late"].blocker is Blocker.CAPACITY
    drv.run_until(3 * HOUR, every=600)
    # r0 finished at 1201: the decision taken at that instant started the waiting job on the freed GPUs
    assert drv.done["r0"] == 1201
    assert drv.started_at("late") == 1201
    assert set(drv.done) == {"r0", "r1", "r2", "r3", "late"}


def test_a_gang_waiting_behind_small_jobs_starts_by_its_planned_start_while_small_jobs_backfill_around_it() -> None:
    w = World().cluster("c1", nodes=4, rack_size=4).budget("org", alloc=3000)
    w.budget("small", "org", alloc=1000, usage=5000).budget("big", "org", alloc=2000)
    # every node carries one small job whose slice ends at a different time
    for i, end in enumerate((1 * HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR)):
        w.running(f"s{i}", "small", {f"c1-h100-{i:02d}": 4}, started=0, slice_end=end, grace=60)
    w.pending("gang", "big", gpus=8, replicas=4, submitted_at=0, slice_seconds=4 * HOUR)
    for i in range(6):
        w.pending(f"b{i}", "small", gpus=2, submitted_at=100 + i, slice_seconds=HOUR)
    durations = {f"s{i}": end for i, end in enumerate((1 * HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR))}
    durations |= {f"b{i}": 20 * 60 for i in range(6)}
    drv = CheckedDriver(w.snapshot(), durations, 0)
    d = drv.step(60)
    plans = [r for r in d.reserves if r.job_id == "gang"]
    assert plans, f"no planned start for the gang: {d.pending['gang']}"
    plan = plans[0]
    assert len(plan.nodes) == 4
    assert plan.planned_start <= 4 * HOUR + 60
    drv.run_until(plan.planned_start + 600, every=300)
    began = drv.started_at("gang")
    assert began is not None and began <= plan.planned_start + 300
    # small jobs backfilled in the meantime, each on GPUs it gave back by the planned start
    backfilled = [e for e in drv.events("start") if e.job.startswith("b")]
    assert backfilled
    for e in backfilled:
        assert drv.done.get(e.job, 10**9) <= began or e.at >= began


def test_a_session_arriving_into_a_full_cluster_starts_once_its_victims_have_left() -> None:
    w = World().cluster("c1", nodes=2).budget("red").budget("blue")
    w.running("opp", "blue", {"c1-h100-00": 8}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=120)
    w.running("slice", "red", {"c1-h100-01": 8}, started=0, slice_end=6 * HOUR, grace=120)
    drv = CheckedDriver(w.snapshot(), {}, 0)
    drv.run_until(600, every=300)
    drv.submit(Job("sess", "red", "alice", 4, kind=JobKind.SESSION, slice_seconds=HOUR))
    d = drv.step(601)
    assert [p.job_id for p in d.preempts] == ["opp"]
    assert d.pending["sess"].blocker is Blocker.WAITING_FOR_GRACE
    assert d.pending["sess"].estimated_start == 601 + 120
    drv.run_until(601 + 120, every=60)
    assert drv.started_at("sess") == 721
    assert "slice" in drv.running()
