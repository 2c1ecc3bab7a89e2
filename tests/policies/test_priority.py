"""The old priority scheduler: one global priority order across teams, per-team limits on non-preemptible GPUs with
preemptible work above them, preemption of lower-priority preemptible work only, and drains that wait for
non-preemptible work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from allotment.core.model import JobKind, NodeState, RunClass
from tests.core.builders import World, two_team_world
from tests.policies.helpers import decide

N0, N1, N2, N3 = (f"c1-h100-0{i}" for i in range(4))
NON, PRE = RunClass.GUARANTEED, RunClass.OPPORTUNISTIC


@dataclass(frozen=True)
class Case:
    name: str
    world: Callable[[], World]
    started: dict[str, RunClass]
    preempted: dict[str, str] = field(default_factory=dict)
    blockers: dict[str, str] = field(default_factory=dict)


CASES = [
    Case(
        "a higher priority jumps every team's queue",
        lambda: (
            two_team_world(2)
            .running("r", "red", {N0: 8}, run_class=NON)
            .pending("patient", "red", 8, submitted_at=1, priority=0)
            .pending("inflated", "blue", 8, submitted_at=50, priority=9)
        ),
        started={"inflated": NON},
        blockers={"patient": "capacity"},
    ),
    Case(
        "within the team's limit work is non-preemptible, above it preemptible",
        lambda: (
            two_team_world()  # red and blue: half the 32 GPUs each, so a limit of 16 non-preemptible GPUs
            .running("r0", "red", {N0: 8}, run_class=NON)
            .running("r1", "red", {N1: 8}, run_class=NON)
            .pending("red-more", "red", 8, submitted_at=1)
            .pending("blue-first", "blue", 8, submitted_at=2)
        ),
        started={"red-more": PRE, "blue-first": NON},
    ),
    Case(
        "an explicit max_gpus is the team's limit",
        lambda: (
            World()
            .cluster("c1")
            .budget("org")
            .budget("red", "org", max_gpus=4)
            .pending("a", "red", 4, submitted_at=1)
            .pending("b", "red", 4, submitted_at=2)
        ),
        started={"a": NON, "b": PRE},
    ),
    Case(
        "higher priority preempts lower-priority preemptible work, never non-preemptible work",
        lambda: (
            two_team_world(2)
            .running("protected", "red", {N0: 8}, run_class=NON, priority=0)
            .running("above-limit", "red", {N1: 8}, run_class=PRE, priority=0)
            .pending("urgent", "blue", 8, priority=5)
        ),
        started={},
        preempted={"above-limit": "priority"},
        blockers={"urgent": "waiting-for-grace"},
    ),
    Case(
        "equal priority does not preempt",
        lambda: (
            two_team_world(1)
            .running("above-limit", "red", {N0: 8}, run_class=PRE, priority=3)
            .pending("b", "blue", 8, priority=3)
        ),
        started={},
        blockers={"b": "capacity"},
    ),
    Case(
        "a job waits for work already leaving instead of preempting more",
        lambda: (
            two_team_world(2)
            .running("leaving", "red", {N0: 8}, run_class=PRE, leaving_until=130)
            .running("other", "red", {N1: 8}, run_class=PRE)
            .pending("urgent", "blue", 8, priority=5)
        ),
        started={},
        blockers={"urgent": "waiting-for-grace"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_priority_cases(case: Case) -> None:
    out = decide("priority", case.world())
    assert out.run_classes == case.started
    assert out.preempted == case.preempted
    for job, blocker in case.blockers.items():
        assert out.blocker(job) == blocker


def test_a_drain_moves_preemptible_work_and_waits_for_non_preemptible_work() -> None:
    w = two_team_world(1).running("kept", "red", {N0: 4}, run_class=NON).running("moved", "red", {N0: 4}, run_class=PRE)
    w.node_state(N0, NodeState.DRAINING)
    out = decide("priority", w)
    assert out.preempted == {"moved": "drain"}
    assert out.decisions.drain_estimates == {}  # the non-preemptible job has no known end: nobody can say when


def test_an_idle_session_is_not_reclaimed_but_ends_at_its_length() -> None:
    w = two_team_world(1).running("s", "red", {N0: 1}, kind=JobKind.SESSION, slice_end=10_000, idle_since=0)
    assert decide("priority", w, now=9_000).preempted == {}
    assert decide("priority", w, now=10_000).preempted == {"s": "session-end"}
