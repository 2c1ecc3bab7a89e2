"""FIFO baselines: arrival order, EASY backfill that never delays the head's planned start, strict FIFO with
consolidated placement, partitions by node labels, time limits and drains."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from allotment.core.model import NodeState
from allotment.policies.common import OWNER_LABEL
from tests.core.builders import HOUR, World, two_team_world
from tests.policies.helpers import decide

N0, N1, N2, N3 = (f"c1-h100-0{i}" for i in range(4))


def owned(w: World, node: str, budget: str) -> World:
    """Give a node to a budget's subtree (its virtual cluster) by label."""
    w.nodes = [replace(n, labels=(*n.labels, (OWNER_LABEL, budget))) if n.name == node else n for n in w.nodes]
    return w


def two_nodes_busy_for_two_hours() -> World:
    """Nodes 0 and 1 full until 2 h (+ 60 s grace); nodes 2 and 3 free."""
    w = two_team_world()
    w.running("r0", "red", {N0: 8}, max_runtime=2 * HOUR)
    w.running("r1", "red", {N1: 8}, max_runtime=2 * HOUR)
    return w


@dataclass(frozen=True)
class Case:
    name: str
    policy: str
    world: Callable[[], World]
    started: dict[str, tuple[str, ...]]
    planned: dict[str, int] = field(default_factory=dict)
    blockers: dict[str, str] = field(default_factory=dict)


CASES = [
    Case(
        "arrival order decides, not priority",
        "fifo",
        lambda: (
            two_team_world(2)
            .running("r", "red", {N0: 8})
            .pending("late", "blue", 8, submitted_at=10, priority=9)
            .pending("early", "red", 8, submitted_at=5)
        ),
        started={"early": (N1,)},
        blockers={"late": "capacity"},
    ),
    Case(
        "a short job backfills before the head's planned start; a job with no time limit does not",
        "fifo",
        lambda: (
            two_nodes_busy_for_two_hours()
            .pending("head", "blue", 8, replicas=4, submitted_at=1, max_runtime=HOUR)
            .pending("short", "red", 8, submitted_at=2, max_runtime=HOUR)
            .pending("endless", "red", 8, submitted_at=3)
        ),
        started={"short": (N2,)},
        planned={"head": 2 * HOUR + 60},
        blockers={"head": "capacity", "endless": "reserved"},
    ),
    Case(
        "a job may use GPUs the planned start leaves spare",
        "fifo",
        lambda: (
            two_team_world()
            .running("r0", "red", {N0: 8}, max_runtime=2 * HOUR)
            .running("r3", "red", {N3: 4})
            .pending("head", "blue", 8, replicas=3, submitted_at=1)
            .pending("beside", "red", 4, submitted_at=2)
        ),
        started={"beside": (N3,)},
        planned={"head": 2 * HOUR + 60},
    ),
    Case(
        "strict FIFO: the blocked head blocks every later job",
        "fifo-strict",
        lambda: (
            two_nodes_busy_for_two_hours()
            .pending("head", "blue", 8, replicas=3, submitted_at=1, max_runtime=HOUR)
            .pending("short", "red", 8, submitted_at=2, max_runtime=HOUR)
        ),
        started={},
        blockers={"head": "capacity", "short": "capacity"},
    ),
    Case(
        "strict FIFO: consolidated placement — a small job on the fullest node, a larger one on whole nodes",
        "fifo-strict",
        lambda: (
            two_team_world()
            .running("r", "red", {N1: 6})
            .pending("gang", "blue", 4, replicas=3, submitted_at=1)
            .pending("pair", "red", 2, submitted_at=2)
        ),
        started={"gang": (N2, N3), "pair": (N1,)},  # the gang in one rack
    ),
    Case(
        "strict FIFO: a partition's blocked head does not block another partition",
        "fifo-strict",
        lambda: (
            owned(owned(owned(owned(two_team_world(), N0, "red"), N1, "red"), N2, "blue"), N3, "blue")
            .running("r", "red", {N0: 8})
            .pending("red-head", "red", 8, replicas=2, submitted_at=1)
            .pending("red-next", "red", 8, submitted_at=2)
            .pending("blue-job", "blue", 8, submitted_at=3)
        ),
        started={"blue-job": (N2,)},
        blockers={"red-head": "capacity", "red-next": "capacity"},
    ),
    Case(
        "strict FIFO: teams restricted to their own clusters never block each other",
        "fifo-strict",
        lambda: (
            World()
            .cluster("c1", nodes=1)
            .cluster("c2", nodes=1)
            .budget("org")
            .budget("red", "org")
            .budget("blue", "org")
            .running("r", "red", {N0: 4})
            .pending("red-head", "red", 8, submitted_at=1, clusters=("c1",))
            .pending("blue-job", "blue", 8, submitted_at=2, clusters=("c2",))
        ),
        started={"blue-job": ("c2-h100-00",)},
        blockers={"red-head": "capacity"},
    ),
    Case(
        "labelled nodes take only their budget's jobs",
        "fifo",
        lambda: owned(owned(two_team_world(2), N0, "red"), N1, "red").pending("b", "blue", 1),
        started={},
        blockers={"b": "no-pool"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fifo_cases(case: Case) -> None:
    out = decide(case.policy, case.world())
    assert out.started == case.started
    assert out.planned == case.planned
    for job, blocker in case.blockers.items():
        assert out.blocker(job) == blocker


@pytest.mark.parametrize("policy", ["fifo", "fifo-strict", "slurm"])
def test_non_preempting_baselines_end_work_only_at_its_time_limit(policy: str) -> None:
    w = two_team_world(1).running("done", "red", {N0: 8}, started=0, max_runtime=HOUR).pending("next", "blue", 8)
    assert decide(policy, w, now=HOUR - 1).preempted == {}
    assert decide(policy, w, now=HOUR).preempted == {"done": "max-runtime"}


@pytest.mark.parametrize("policy", ["fifo", "fifo-strict", "slurm"])
def test_a_draining_node_empties_as_its_jobs_end_without_preemption(policy: str) -> None:
    w = two_team_world(2).running("bounded", "red", {N0: 4}, max_runtime=3 * HOUR).running("open", "red", {N1: 4})
    w.node_state(N0, NodeState.DRAINING).node_state(N1, NodeState.DRAINING)
    out = decide(policy, w)
    assert out.preempted == {}
    assert out.decisions.drain_estimates == {N0: 3 * HOUR + 60}  # N1's job has no known end
