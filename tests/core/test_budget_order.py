"""A budget's own order of jobs (rule `fair-share-order`, promise 3): priority, highest first, then age, then id.

CycleState sorts each budget's queue on one integer per job, then puts runs of equal priority and age in id order,
rather than sorting on a tuple key (decision 44); these tests pin that the two give the same order, ties included.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as s

from allotment.core.indices import sort_by_budget_order
from allotment.core.model import Job
from allotment.core.state import CycleState
from tests.core.builders import two_team_world


def _job(jid: str, priority: int, submitted_at: int) -> Job:
    return Job(jid, "a", "u", 1, priority=priority, submitted_at=submitted_at)


def _reference(jobs: list[Job]) -> list[str]:
    return [j.id for j in sorted(jobs, key=lambda j: (-j.priority, j.submitted_at, j.id))]


CASES = {
    "higher priority first": ([("old-low", 0, 0), ("new-high", 5, 100)], ["new-high", "old-low"]),
    "same priority: older first": ([("b-new", 1, 50), ("a-old", 1, 10)], ["a-old", "b-new"]),
    "same priority and age: by id": ([("j2", 1, 10), ("j10", 1, 10), ("j1", 1, 10)], ["j1", "j10", "j2"]),
    "negative priorities and times": ([("x", -2, -5), ("y", -1, 7), ("z", -2, -9)], ["y", "z", "x"]),
}


def test_named_cases() -> None:
    for name, (rows, expected) in CASES.items():
        jobs = [_job(*row) for row in rows]
        sort_by_budget_order(jobs)
        assert [j.id for j in jobs] == expected, name


@settings(max_examples=300, deadline=None)
@given(
    s.lists(
        s.tuples(s.integers(-3, 3), s.integers(-50, 50), s.text("abc", min_size=1, max_size=3)),
        max_size=40,
        unique_by=lambda t: t[2],
    )
)
def test_same_order_as_the_tuple_key(rows: list[tuple[int, int, str]]) -> None:
    jobs = [_job(jid, priority, at) for priority, at, jid in rows]
    expected = _reference(jobs)
    sort_by_budget_order(jobs)
    assert [j.id for j in jobs] == expected


def test_cycle_queues_follow_the_budget_order() -> None:
    world = two_team_world()
    for jid, priority, at in [("a3", 0, 30), ("a1", 2, 50), ("a2", 0, 10), ("a4", 2, 50)]:
        world.pending(jid, "red", priority=priority, submitted_at=at)
    st = CycleState(world.snapshot(), now=100)
    assert [j.id for j in st.ix.queues["red"]] == ["a1", "a4", "a2", "a3"]
