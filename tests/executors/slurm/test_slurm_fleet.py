"""Fleet sync with the real local cluster: Slurm's node states as Allotment sees them, and back.

Covers: discover_nodes reads every node with its GPU count, CPUs and memory; a node set DRAIN in Slurm shows as
draining with its reason; set_node_state drain/resume/down round-trips; a job on a node that goes DOWN is reported
LOST once and is not restarted by Slurm on its own.
"""

from __future__ import annotations

import time

from allotment.core.model import NodeState
from allotment.executors.slurm import SlurmExecutor
from allotment.ports.executor import EventKind
from allotment.ports.fleet import action_for

from .helpers import ended, final, kinds, spec, started, wait_for


def _node(executor: SlurmExecutor, name: str) -> tuple[NodeState, str | None, int]:
    [found] = [d for d in executor.discover_nodes() if d.node.name == name]
    return found.node.state, found.reason, found.node.gpus


def _wait_state(executor: SlurmExecutor, name: str, state: NodeState) -> tuple[NodeState, str | None, int]:
    """A resumed node reads NOT_RESPONDING (so DOWN) until its slurmd registers again, about a second later."""
    deadline = time.monotonic() + 20
    while (got := _node(executor, name))[0] is not state and time.monotonic() < deadline:
        time.sleep(0.2)
    return got


def test_discover_nodes_reads_the_fleet(executor: SlurmExecutor) -> None:
    nodes = executor.discover_nodes()
    assert [d.node.name for d in nodes] == [f"gpu{i:02d}" for i in range(1, 9)]
    assert all(d.node.gpus == 8 and d.node.cluster == "slurm" for d in nodes)
    # CPUs=16 per node; no RealMemory configured (Slurm's default of 1 reads as not declared)
    assert all((d.node.cpus, d.node.memory) == (16, 0) for d in nodes)


def test_drain_in_slurm_shows_as_draining_and_round_trips(executor: SlurmExecutor) -> None:
    reason = "bad DIMM; ticket #42 (a=b)"
    executor.cli.scontrol("update", "NodeName=gpu08", "State=DRAIN", f"Reason={reason}")
    try:
        assert _node(executor, "gpu08") == (NodeState.DRAINING, reason, 8)
        executor.set_node_state("gpu08", "resume")
        assert _wait_state(executor, "gpu08", NodeState.READY)[0] is NodeState.READY
        executor.set_node_state("gpu08", "resume")  # resuming a ready node is a no-op
        executor.set_node_state("gpu08", action_for(NodeState.DRAINING), "allotment drain")
        assert _node(executor, "gpu08")[:2] == (NodeState.DRAINING, "allotment drain")
        executor.set_node_state("gpu08", "down", "allotment down")
        assert _node(executor, "gpu08")[:2] == (NodeState.DOWN, "allotment down")
    finally:
        executor.set_node_state("gpu08", "resume")
    assert _wait_state(executor, "gpu08", NodeState.READY)[0] is NodeState.READY


def test_job_on_a_node_that_goes_down_is_lost(executor: SlurmExecutor) -> None:
    _wait_state(executor, "gpu07", NodeState.READY)
    executor.launch(spec("down-1", ["sleep", "60"], ["gpu07"]))
    events = wait_for(executor, started("down-1"))
    try:
        executor.set_node_state("gpu07", "down", "test: node failure")
        events = wait_for(executor, ended("down-1"), seen=events)
    finally:
        executor.set_node_state("gpu07", "resume")
        _wait_state(executor, "gpu07", NodeState.READY)
    assert kinds(events, "down-1") == [EventKind.STARTED, EventKind.LOST]
    assert "requeued by Slurm" in final(events, "down-1").detail or "NODE_FAIL" in final(events, "down-1").detail
    assert executor.alive() == {}
    assert executor.poll() == []
    # Slurm does not get to run the lost attempt again by itself.
    slurm_id = executor.slurm_job_id("down-1", 0)
    state = executor.cli.run(["squeue", "-h", "-t", "all", "-j", str(slurm_id), "-o", "%T"]).strip()
    assert state == "CANCELLED"
