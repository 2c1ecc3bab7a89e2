"""Multi-round scenarios, part 2: contracts over time — a slice ending and the lapsed job yielding to an under-share
budget, a budget running out of funds mid-way, a node drained mid-run, and a capacity window opening."""

from __future__ import annotations

from dataclasses import replace

from allotment.core.decisions import PreemptReason
from allotment.core.model import ContractClass, NodeState, RunClass
from tests.core.builders import HOUR, World
from tests.core.strategies import CheckedDriver


def _preempted(drv: CheckedDriver, job: str) -> list[str]:
    return [e.detail for e in drv.events("preempt") if e.job == job]


def test_a_lapsed_job_is_preempted_for_an_under_share_budget_only_after_its_slice() -> None:
    # red has used far more than its share; its job's slice ends in an hour and red cannot fund another
    w = World().cluster("c1", nodes=1).budget("red", balance=1, usage=5000).budget("blue")
    w.running("hog", "red", {"c1-h100-00": 8}, started=0, slice_end=HOUR, grace=60)
    w.pending("fresh", "blue", gpus=8, submitted_at=0)
    drv = CheckedDriver(w.snapshot(), {"fresh": HOUR}, 0)
    drv.run_until(HOUR - 60, every=300)
    assert "hog" in drv.running() and not _preempted(drv, "hog")
    drv.run_until(HOUR + 600, every=60)
    assert [e.job for e in drv.events("lapse")] == ["hog"]
    assert _preempted(drv, "hog") and _preempted(drv, "hog")[0] in (
        PreemptReason.FAIR_SHARE.value,
        PreemptReason.RESERVATION.value,
    )
    began = drv.started_at("fresh")
    assert began is not None and HOUR <= began <= HOUR + 60 + 60


def test_a_budget_running_out_of_funds_lapses_runs_opportunistically_and_yields_to_a_funded_budget() -> None:
    # red can pay for one 1-hour slice of 8 H100 (8 credits) and a little more, not for a second slice
    w = World().cluster("c1", nodes=1).budget("red", balance=10).budget("blue", alloc=1000)
    w.pending("long", "red", gpus=8, submitted_at=0, slice_seconds=HOUR, fallback_opportunistic=True, grace=60)
    drv = CheckedDriver(w.snapshot(), {}, 0)
    d = drv.step(1)
    start = next(s for s in d.starts if s.job_id == "long")
    assert start.run_class is RunClass.GUARANTEED and start.slice_end == 1 + HOUR
    drv.run_until(HOUR + 1, every=600)
    assert [e.job for e in drv.events("lapse")] == ["long"]
    assert drv.jobs["long"].run is not None and drv.jobs["long"].run.run_class is RunClass.OPPORTUNISTIC
    assert drv.accounts["red"].balance >= 0  # the guaranteed slice never overdrew red
    drv.run_until(2 * HOUR, every=600)
    assert "long" in drv.running()  # nobody else wants the GPUs: it keeps running, opportunistically
    drv.submit(replace(drv.jobs["long"], id="paid", budget="blue", run=None, fallback_opportunistic=False))
    d = drv.step(drv.now + 1)
    assert [(p.job_id, p.reason) for p in d.preempts] == [("long", PreemptReason.FOR_GUARANTEED)]
    drv.run_until(drv.now + 120, every=30)
    assert drv.running() == {"paid"}
    assert drv.jobs["paid"].run is not None and drv.jobs["paid"].run.run_class is RunClass.GUARANTEED


def test_a_node_drained_mid_run_empties_by_its_estimate_and_its_work_is_requeued_elsewhere() -> None:
    w = World().cluster("c1", nodes=2).budget("red").budget("blue")
    w.pending("in-slice", "red", gpus=4, submitted_at=0, slice_seconds=2 * HOUR, grace=60)
    w.pending("opp", "blue", gpus=4, submitted_at=0, contract=ContractClass.OPPORTUNISTIC, grace=30)
    drv = CheckedDriver(w.snapshot(), {}, 0)
    drv.run_until(1800, every=600)
    assert drv.running() == {"in-slice", "opp"}
    run = drv.jobs["in-slice"].run
    assert run is not None and run.slice_end is not None
    node = run.placement[0].node
    nodes = tuple(replace(n, state=NodeState.DRAINING) if n.name == node else n for n in drv.snapshot.nodes)
    drv.set_snapshot(nodes=nodes)
    d = drv.step(1801)
    estimate = d.drain_estimates[node]
    # the job inside its slice stays to the end of it; the operator sees when the node will be empty
    assert estimate == run.slice_end + 60
    assert estimate <= 1801 + drv.snapshot.policy.max_slice + drv.snapshot.policy.max_grace
    drv.run_until(estimate, every=600)
    staying = [
        j.id
        for j in drv.jobs.values()
        if j.run is not None
        and node in j.run.nodes
        and (j.run.preemption is None or j.run.preemption.kill_at > estimate)
    ]
    assert not staying
    drv.step(estimate + 1)
    moved = drv.jobs["in-slice"].run
    assert moved is not None and node not in moved.nodes


def test_a_capacity_window_opens_and_its_budget_reclaims_the_pool() -> None:
    w = World().cluster("c1", nodes=2).budget("red").budget("blue")
    w.window("pretrain", "red", "c1", gpus=16, start=2 * HOUR, end=10 * HOUR)
    for i in range(2):
        w.pending(f"b{i}", "blue", gpus=8, submitted_at=0, slice_seconds=8 * HOUR, grace=60)
    w.pending("p0", "red", gpus=8, submitted_at=0, slice_seconds=4 * HOUR)
    w.pending("p1", "red", gpus=8, submitted_at=0, slice_seconds=4 * HOUR)
    drv = CheckedDriver(w.snapshot(), {}, 0)
    d = drv.step(1)
    # before the window, blue may use the pool, but no slice of blue reaches into the window
    for s in d.starts:
        if s.job_id.startswith("b"):
            assert s.slice_end is None or s.slice_end <= 2 * HOUR
    drv.run_until(2 * HOUR + 900, every=300)
    assert {"p0", "p1"} <= drv.running()
    for b in ("b0", "b1"):
        run = drv.jobs[b].run
        assert run is None or run.preemption is not None
