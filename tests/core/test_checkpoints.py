"""Rule `least-lost-work` (docs/policy.md §5 and §8): the work a preemption would lose is the work since the run's
last reported checkpoint, and a planned start waits — at most `checkpoint_wait`, never past a start it promised —
for the work it calls away to save its next checkpoint."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from allotment.core.checkpoints import MARGIN, least_lost_start, unsaved_at, unsaved_work
from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import Allocation, Run, RunClass
from tests.core.builders import HOUR, World
from tests.core.driver import Driver

MIN = 60
SLICE_END = 2 * HOUR + 15 * MIN


def _run(started: int = 0, saved: int | None = None, every: int | None = None) -> Run:
    return Run((Allocation("n", (0,)),), started, RunClass.OPPORTUNISTIC, checkpoint_at=saved, checkpoint_every=every)


@dataclass(frozen=True)
class Case:
    name: str
    victims: tuple[tuple[Run, int, int], ...]
    base: int
    now: int
    wait: int
    expected: int


A = _run(0, 60 * MIN, 30 * MIN)  # saves every 30 minutes from its start at 0; last report at 1 h
B = _run(0, 50 * MIN, 50 * MIN)  # every 50 minutes; last report at 50 min

CASES = [
    Case("nothing called away", (), 70 * MIN, 70 * MIN, HOUR, 70 * MIN),
    Case("no report: nothing is predicted", ((_run(), 8, MIN),), 70 * MIN, 70 * MIN, HOUR, 70 * MIN),
    Case("the next checkpoint is waited for", ((A, 8, MIN),), 75 * MIN, 75 * MIN, HOUR, 90 * MIN + MARGIN + MIN),
    Case("just saved: it starts at once", ((A, 8, MIN),), 61 * MIN, 60 * MIN, HOUR, 61 * MIN),
    Case("beyond the wait: at once", ((A, 8, MIN),), 62 * MIN, 62 * MIN, 20 * MIN, 62 * MIN),
    Case("an overdue checkpoint ends the rhythm", ((A, 8, MIN),), 92 * MIN, 92 * MIN, HOUR, 92 * MIN),
    Case("a slice end waits for the checkpoint after it", ((A, 8, MIN),), 130 * MIN, 70 * MIN, HOUR,
         150 * MIN + MARGIN + MIN),
    Case("the larger victim's checkpoint wins", ((A, 8, MIN), (B, 64, MIN)), 75 * MIN, 75 * MIN, HOUR,
         100 * MIN + MARGIN + MIN),
    Case("no wait configured", ((A, 8, MIN),), 75 * MIN, 75 * MIN, 0, 75 * MIN),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_plan_starts_when_its_victims_lose_the_least(case: Case) -> None:
    assert least_lost_start(case.base, case.victims, case.now, case.wait) == case.expected


def test_the_work_lost_is_the_work_since_the_last_checkpoint() -> None:
    assert unsaved_work(_run(100), 400) == 300
    assert unsaved_work(_run(100, 350, 250), 400) == 50
    assert unsaved_work(None, 400) == 0
    assert unsaved_at(_run(0, 60 * MIN, 30 * MIN), 100 * MIN, 70 * MIN) == 10 * MIN  # predicted: saved at 90 min
    assert unsaved_at(_run(0, 60 * MIN, 30 * MIN), 100 * MIN, 95 * MIN) == 40 * MIN  # overdue: since 60 min


def _lab(reports: bool) -> Driver:
    """One 8-GPU node held by "big"'s job, whose slice ends at 2 h 15 min (big has no credits left to renew it) and
    which saves a checkpoint every 30 minutes from its start at 0; "light" (below its share) asks for the node at
    2 h 10 min."""
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000).policy(default_headroom=0)
    w.budget("big", "org", balance=0, usage=5000.0).budget("light", "org")
    w.running(
        "r0",
        "big",
        {"c1-h100-00": 8},
        started=0,
        slice_end=SLICE_END,
        slice_seconds=HOUR,
        checkpoint_at=2 * HOUR if reports else None,
        checkpoint_every=30 * MIN if reports else None,
    )
    drv = Driver(w.snapshot(), durations={"r0": 20 * HOUR}, now=2 * HOUR + 10 * MIN, checkpoints={"r0": 30 * MIN})
    if not reports:
        drv.silent.add("r0")
    return drv


def test_a_plan_waits_for_the_work_it_calls_away_to_save() -> None:
    drv = _lab(reports=True)
    grace = min(drv.snapshot.policy.max_grace, drv.jobs["r0"].grace)
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000)
    drv.submit(w.budget("light", "org").pending("g", "light", gpus=8).jobs["g"], duration=HOUR)
    (plan,) = drv.step(drv.now).reserves
    assert plan.planned_start == 2 * HOUR + 30 * MIN + MARGIN + grace
    drv.run_until(3 * HOUR, every=300)
    # told to leave as soon as it reports the checkpoint at 2 h 30 min: it loses only its grace, and the plan starts
    # then, a minute before the time promised
    assert drv.started_at("g") == 2 * HOUR + 30 * MIN + grace
    assert drv.lost["r0"] == grace


def test_without_reports_the_plan_calls_the_work_away_at_once() -> None:
    drv = _lab(reports=False)
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000)
    drv.submit(w.budget("light", "org").pending("g", "light", gpus=8).jobs["g"], duration=HOUR)
    (plan,) = drv.step(drv.now).reserves
    grace = min(drv.snapshot.policy.max_grace, drv.jobs["r0"].grace)
    assert plan.planned_start == SLICE_END + grace
    drv.run_until(3 * HOUR, every=300)
    assert drv.started_at("g") == plan.planned_start
    assert [e.job for e in drv.events("preempt")] == ["r0"]
    assert drv.lost["r0"] == SLICE_END + grace - 2 * HOUR  # told at its slice end: 15 minutes since its checkpoint


# -- the nodes a plan calls away ------------------------------------------------------------------------------------

decide = AllotmentPolicy().decide
NOW = 2 * HOUR + 10 * MIN


def _held(nodes: int, rack_size: int = 2) -> World:
    """`nodes` 8-GPU nodes of one cluster, each to be held by a job of "big" (no credits left: none renews) whose
    slice ends at 2 h 15 min; "light", below its share, asks for GPUs at 2 h 10 min."""
    w = World().cluster("c1", nodes=nodes, rack_size=rack_size, block_size=1).budget("org", alloc=2000)
    return w.policy(default_headroom=0).budget("big", "org", balance=0, usage=5000.0).budget("light", "org")


def _node(i: int) -> str:
    return f"c1-h100-{i:02d}"


def test_a_plan_takes_a_later_node_whose_work_is_about_to_save() -> None:
    """Node 0's work reports nothing (it would lose all 2 h 15 min of its run); node 1's slice ends 20 minutes
    later, and it saves every 30 minutes (last at 2 h). The plan waits for node 1's checkpoint at 3 h — within
    `checkpoint_wait` of node 0's earliest — rather than call node 0's work away at once."""
    w = _held(2).running("x0", "big", {_node(0): 8}, started=0, slice_end=SLICE_END)
    w.running("x1", "big", {_node(1): 8}, started=0, slice_end=SLICE_END + 20 * MIN, checkpoint_at=2 * HOUR,
              checkpoint_every=30 * MIN)  # fmt: skip
    snap = w.pending("g", "light", gpus=8, submitted_at=NOW).snapshot()
    (plan,) = decide(snap, NOW).reserves
    grace = snap.policy.default_grace_of
    assert (plan.nodes, plan.planned_start) == (((_node(1), 8),), 3 * HOUR + MARGIN + grace)


def test_without_reports_a_plan_takes_the_earliest_node() -> None:
    """The same nodes, neither reporting: node 1's work would lose more by its later slice end, so the plan stays
    on node 0 at its earliest start."""
    w = _held(2).running("x0", "big", {_node(0): 8}, started=0, slice_end=SLICE_END)
    w.running("x1", "big", {_node(1): 8}, started=0, slice_end=SLICE_END + 20 * MIN)
    snap = w.pending("g", "light", gpus=8, submitted_at=NOW).snapshot()
    (plan,) = decide(snap, NOW).reserves
    assert (plan.nodes, plan.planned_start) == (((_node(0), 8),), SLICE_END + snap.policy.default_grace_of)


def test_a_gang_plan_keeps_its_rack_and_takes_the_one_losing_least() -> None:
    """Four nodes in two racks, every slice ending at 2 h 15 min. A 16-GPU gang fits either rack; rack 1 holds the
    work that saved most recently (node 2 saved at 2 h 14 min), so the plan takes rack 1 — never node 2 with a node
    of the other rack, although that pair would lose the same."""
    w = _held(4)
    for i in range(4):
        saved = 2 * HOUR + 14 * MIN if i == 2 else None
        w.running(f"x{i}", "big", {_node(i): 8}, started=0, slice_end=SLICE_END, checkpoint_at=saved,
                  checkpoint_every=30 * MIN if saved else None)  # fmt: skip
    snap = w.pending("g", "light", gpus=8, replicas=2, submitted_at=NOW).snapshot()
    (plan,) = decide(snap, NOW).reserves
    assert (plan.nodes, plan.planned_start) == (
        ((_node(2), 8), (_node(3), 8)),
        SLICE_END + snap.policy.default_grace_of,
    )
