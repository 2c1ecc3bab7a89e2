"""The engine with the Slurm executor on a real local Slurm cluster (issue 4): the fleet is discovered from Slurm;
a 4-node gang runs one task on each chosen node with its arguments verbatim; opportunistic jobs it displaces get
SIGTERM (one checkpoints, one ignores it and is SIGKILLed after its grace), are requeued and resume with their
restart count incremented; a node set DOWN in Slurm becomes DOWN in Allotment (its job is requeued elsewhere) and
an Allotment drain becomes a Slurm DRAIN, both ways back to ready."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from allotment.core.model import ContractClass, NodeState
from allotment.engine.fleet_sync import MISSING_REASON, SyncedExecutor
from allotment.engine.setup import Built
from allotment.executors.slurm import SlurmExecutor
from allotment.ports.fleet import DiscoveredNode
from allotment.store.db import reading
from allotment.store.tables import NodeRow
from tests.integration.support import (
    BEHAVE,
    PY,
    REPORT,
    WEIRD_ARGS,
    add_job,
    cancel,
    final,
    job,
    lines,
    running,
    runs,
    step_until,
    wait_until,
)


def _slurm(built: Built) -> SlurmExecutor:
    ex = built.engine.executor
    assert isinstance(ex, SyncedExecutor) and isinstance(ex.inner, SlurmExecutor)
    return ex.inner


def _nodes(built: Built) -> dict[str, tuple[str, str | None, int]]:
    with reading(built.sessions) as s:
        return {r.name: (r.state, r.reason, r.gpus) for r in s.scalars(select(NodeRow))}


def _in_slurm(built: Built, node: str) -> DiscoveredNode:
    [found] = [d for d in _slurm(built).discover_nodes() if d.node.name == node]
    return found


def test_gang_preemption_and_requeue_through_the_engine(slurm: Built, tmp_path: Path) -> None:
    slurm.engine.step()
    nodes = _nodes(slurm)
    assert {n for n, (state, _, gpus) in nodes.items() if state == "ready" and gpus == 8} == {
        "gpu01",
        "gpu02",
        "gpu03",
        "gpu04",
    }
    assert nodes["slurm-0000"][:2] == ("down", MISSING_REASON)  # the configuration's placeholder is not in Slurm

    logs = {"checkpoints": tmp_path / "checkpoints.log", "ignores": tmp_path / "ignores.log"}
    opp = ContractClass.OPPORTUNISTIC
    checkpoints = add_job(
        slurm, "physics", "ben", [PY, "-c", BEHAVE, str(logs["checkpoints"]), "checkpoint"], 8, contract=opp, grace=10
    )
    ignores = add_job(
        slurm, "biology", "chen", [PY, "-c", BEHAVE, str(logs["ignores"]), "ignore"], 8, contract=opp, grace=2
    )
    step_until(slurm, running(slurm, checkpoints, ignores), what="the opportunistic jobs to run")
    wait_until(lambda: all(lines(p) for p in logs.values()), what="the opportunistic jobs to log their start")

    # A guaranteed gang of every node: both opportunistic jobs must leave.
    out = tmp_path / "gang"
    out.mkdir()
    gang = add_job(slurm, "physics", "ada", [PY, "-c", REPORT, str(out), *WEIRD_ARGS], 8, replicas=4)
    step_until(slurm, final(slurm, gang), timeout=90, what="the gang to run and end")
    assert job(slurm, gang).state == "completed"
    [run] = runs(slurm, gang)
    chosen = sorted(a["node"] for a in run.placement)
    assert chosen == ["gpu01", "gpu02", "gpu03", "gpu04"]
    reports = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(reports) == chosen  # one task on each chosen node, each reporting its node
    for node, report in reports.items():
        env = report["env"]
        assert env["SLURMD_NODENAME"] == node
        assert (env["ALLOT_JOB_ID"], env["ALLOT_REPLICAS"], env["ALLOT_RESTART_COUNT"]) == (gang, "4", "0")
        assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 8
        assert report["argv"] == WEIRD_ARGS

    first = {v: runs(slurm, v)[0] for v in (checkpoints, ignores)}
    assert [w.split()[1] for w in lines(logs["checkpoints"])[:3]] == ["start", "term", "checkpoint"]
    assert [w.split()[1] for w in lines(logs["ignores"])[:2]] == ["start", "term"]
    assert first[checkpoints].exit_code == 0 and first[checkpoints].preempt_reason is not None
    assert first[ignores].exit_code == 137 and first[ignores].preempt_reason is not None  # SIGKILL after 2 s

    step_until(slurm, final(slurm, checkpoints, ignores), timeout=90, what="the requeued jobs to resume")
    for victim, log in ((checkpoints, logs["checkpoints"]), (ignores, logs["ignores"])):
        assert lines(log)[-1].split()[:2] == ["1", "resumed"]  # ALLOT_RESTART_COUNT went up
        assert [(r.attempt, r.exit_code) for r in runs(slurm, victim)] == [(0, first[victim].exit_code), (1, 0)]
        assert job(slurm, victim).state == "completed"


def test_node_states_sync_both_ways(slurm: Built) -> None:
    ex = _slurm(slurm)
    held = add_job(slurm, "physics", "ben", ["sleep", "300"], 8)
    step_until(slurm, running(slurm, held), what="the job to run")
    [alloc] = runs(slurm, held)[0].placement
    down = alloc["node"]

    # Slurm marks the node DOWN: Allotment sees it DOWN, the job is lost (refunded) and requeued elsewhere.
    ex.set_node_state(down, "down", "test: node failure")
    try:
        step_until(slurm, lambda: _nodes(slurm)[down][0] == NodeState.DOWN.value, what="DOWN to reach Allotment")
        assert "node failure" in str(_nodes(slurm)[down][1])
        step_until(slurm, lambda: len(runs(slurm, held)) > 1 and running(slurm, held)(), what="the requeued run")
        lost, again = runs(slurm, held)  # synced before the requeue's cycle: never placed on the DOWN node
        assert lost.end_reason == "node lost" and lost.exit_code is None
        assert again.placement[0]["node"] != down and again.attempt == 1
    finally:
        ex.set_node_state(down, "resume")
    step_until(slurm, lambda: _nodes(slurm)[down][0] == NodeState.READY.value, what="the resume to reach Allotment")

    # An Allotment operator drains a node: Slurm gets DRAIN with the reason; ready again resumes it there.
    drained = again.placement[0]["node"]
    with slurm.sessions.begin() as s:
        row = s.get(NodeRow, drained)
        assert row is not None
        row.state, row.reason = NodeState.DRAINING.value, "disk errors"
    step_until(slurm, lambda: "DRAIN" in _in_slurm(slurm, drained).manager_state, what="DRAIN to reach Slurm")
    assert _in_slurm(slurm, drained).reason == "allotment: disk errors"
    assert job(slurm, held).state == "running"  # inside its slice: it leaves at the slice end, not now
    with slurm.sessions.begin() as s:
        row = s.get(NodeRow, drained)
        assert row is not None
        row.state, row.reason = NodeState.READY.value, None
    step_until(slurm, lambda: "DRAIN" not in _in_slurm(slurm, drained).manager_state, what="RESUME to reach Slurm")
    step_until(slurm, lambda: _nodes(slurm)[drained][0] == "ready", what="the node to stay ready")
    cancel(slurm, held)
    step_until(slurm, final(slurm, held), what="the job to end")
