"""Slurm-like baseline: Fair Tree ranking over the budget tree, the multifactor priority order, and backfill that
delays no planned start of a higher-priority job."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from allotment.core.model import Budget
from allotment.policies.slurm import fair_tree
from tests.core.builders import HOUR, World, two_team_world
from tests.policies.helpers import decide

N0, N1, N2, N3 = (f"c1-h100-0{i}" for i in range(4))


@dataclass(frozen=True)
class TreeCase:
    name: str
    budgets: tuple[tuple[str, str | None, int], ...]
    """(name, parent, allocation)"""
    usage: dict[str, float]
    factors: dict[str, float]


TREE_CASES = [
    TreeCase(
        "without usage every Level FS is infinite: ties go by name",
        (("org", None, 2), ("a", "org", 1), ("b", "org", 1)),
        {},
        {"a": 1.0, "b": 0.5},
    ),
    TreeCase(
        "less usage for the same shares ranks first",
        (("org", None, 2), ("a", "org", 1), ("b", "org", 1)),
        {"a": 10.0, "b": 1.0},
        {"b": 1.0, "a": 0.5},
    ),
    TreeCase(
        "shares count: usage is compared with allocation (3:1 shares, 3:2 usage)",
        (("org", None, 4), ("a", "org", 3), ("b", "org", 1)),
        {"a": 3.0, "b": 2.0},
        {"a": 1.0, "b": 0.5},
    ),
    TreeCase(
        "a sibling account that used less ranks all its children above the other account's",
        (("org", None, 2), ("g1", "org", 1), ("x", "g1", 1), ("y", "g1", 1), ("g2", "org", 1), ("z", "g2", 1)),
        {"x": 9.0, "y": 0.0, "z": 10.0},
        {"y": 1.0, "x": 2 / 3, "z": 1 / 3},
    ),
]


@pytest.mark.parametrize("case", TREE_CASES, ids=lambda c: c.name)
def test_fair_tree(case: TreeCase) -> None:
    budgets = [Budget(n, p, a) for n, p, a in case.budgets]
    assert fair_tree(budgets, case.usage) == pytest.approx(case.factors)


def test_fair_share_outweighs_age_and_priority() -> None:
    w = (
        World()
        .cluster("c1", nodes=1)
        .budget("org", alloc=2000)
        .budget("heavy", "org", usage=500.0)
        .budget("light", "org", usage=10.0)
    )
    w.pending("old-urgent", "heavy", 8, submitted_at=0, priority=9)
    w.pending("new", "light", 8, submitted_at=6 * 24 * HOUR)
    out = decide("slurm", w, now=6 * 24 * HOUR + 10)
    assert out.started == {"new": (N0,)}


def test_age_and_priority_order_one_budget() -> None:
    w = World().cluster("c1", nodes=1).budget("org").budget("red", "org")
    w.pending("young-high", "red", 8, submitted_at=1000, priority=5)
    w.pending("old-low", "red", 8, submitted_at=0, priority=0)
    w.pending("young-low", "red", 8, submitted_at=1000, priority=0)
    out = decide("slurm", w, now=2000)
    assert out.started == {"young-high": (N0,)}


def test_backfill_delays_no_planned_start() -> None:
    """Blocked jobs each get a planned start, held for their time limit; a later job starts only where it delays
    none of them. Order: fair share (all equal: blue, then green), then size (larger first)."""
    w = two_team_world().budget("green", "org", alloc=1000)
    w.running("r0", "red", {N0: 8}, max_runtime=HOUR)
    w.running("r1", "red", {N1: 8}, max_runtime=3 * HOUR)
    w.pending("wide", "blue", 8, replicas=3, submitted_at=1, max_runtime=HOUR)  # N0 (1 h) + N2 + N3
    w.pending("next", "green", 8, replicas=2, submitted_at=2, max_runtime=2 * HOUR)  # too long to end before wide
    w.pending("filler", "green", 8, submitted_at=3, max_runtime=2 * HOUR)  # would end after wide's planned start
    w.pending("quick", "green", 4, submitted_at=4, max_runtime=HOUR // 2)  # ends before wide's start
    out = decide("slurm", w, now=0)
    assert out.planned["wide"] == HOUR + 60
    assert out.planned["next"] == 2 * HOUR + 120  # after wide's time limit: its planned start delays nothing
    assert set(out.started) == {"quick"}
    assert "filler" not in out.started
