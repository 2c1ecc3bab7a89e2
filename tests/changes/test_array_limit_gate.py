"""The eligibility gate's `%N` rule (changes/eligibility.py) through the snapshot loader both stores share: of a
limited array's waiting tasks only the first `N - active` by index reach decide(), a held or cancelled task takes
no place, a task whose run has not ended yet counts as active, arrays do not share a limit, and the others wait with
a reason that names the limit and is written once while it stays the same."""

from __future__ import annotations

import pytest

from allotment.changes.snapshot import ActiveRow, OpenRunRow, SnapshotCache
from allotment.changes.steps import reason_changes
from allotment.core.decisions import Blocker, Decisions
from allotment.core.model import Job
from tests.changes.support import T0, loaded

RUN_COLUMNS = (T0, "guaranteed", None, None, None, None, None, None, None, None, None, 0)


def task(array: str, index: int, state: str = "pending", *, limit: int = 2, cancel: bool = False,
         hold: str | None = None) -> ActiveRow:  # fmt: skip
    return (f"{array}_{index}", state, cancel, hold, 0, False, (array, index, limit), None)


def plain(job_id: str) -> ActiveRow:
    return (job_id, "pending", False, None, 0, False, None, None)


def load(active: list[ActiveRow], keep: SnapshotCache, ended_late: tuple[str, ...] = ()) -> list[str]:
    """The pending job ids the snapshot holds (the running ones are left out of the answer)."""
    jobs = {row[0]: Job(row[0], "lab", "ann", 1) for row in active}
    runs = [OpenRunRow(jid, [], 0, 0, T0, T0, RUN_COLUMNS) for jid, state, *_ in active if state != "pending"]
    runs += [OpenRunRow(jid, [], 0, 0, T0, T0, RUN_COLUMNS) for jid in ended_late]
    snap = loaded(active, keep, jobs, open_runs=runs)
    return sorted(j.id for j in snap.jobs if j.run is None)


CASES = [
    pytest.param([task("a", i) for i in range(5)], ["a_0", "a_1"], id="first-n-by-index"),
    pytest.param([task("a", 10), task("a", 2), task("a", 9)], ["a_2", "a_9"], id="index-order-not-id-order"),
    pytest.param([task("a", 0, "running"), *(task("a", i) for i in (1, 2, 3))], ["a_1"], id="one-running-one-more"),
    pytest.param([task("a", 0, "running"), task("a", 1, "preempting"), task("a", 2)], [], id="limit-reached"),
    pytest.param([task("a", 0, hold="user"), task("a", 1), task("a", 2)], ["a_1", "a_2"], id="held-takes-no-place"),
    pytest.param([task("a", 0, cancel=True), task("a", 1), task("a", 2)], ["a_1", "a_2"], id="cancelled-no-place"),
    pytest.param(
        [task("a", i, limit=1) for i in range(3)] + [task("b", i, limit=1) for i in range(3)],
        ["a_0", "b_0"],
        id="arrays-do-not-share-a-limit",
    ),
    pytest.param([task("a", 0, limit=5), task("a", 1, limit=5), plain("j1")], ["a_0", "a_1", "j1"], id="under-limit"),
]


@pytest.mark.parametrize(("active", "considered"), CASES)
def test_only_the_first_tasks_within_the_limit_are_considered(active: list[ActiveRow], considered: list[str]) -> None:
    keep = SnapshotCache()
    assert load(active, keep) == considered
    waiting = {row[0] for row in active if row[1] == "pending" and not row[2]} - set(considered)
    assert set(keep.gated) == waiting
    for jid, reason in keep.gated.items():
        if reason.blocker is Blocker.ARRAY_LIMIT:
            assert "runs at most" in reason.message and "%" in reason.message and reason.needed_gpus == 1
        else:
            assert reason.blocker is Blocker.HELD and jid == "a_0"


def test_a_task_whose_run_has_not_ended_counts_as_active() -> None:
    keep = SnapshotCache()
    assert load([task("a", 0), task("a", 1), task("a", 2)], keep, ended_late=("a_0",)) == ["a_1"]


def test_the_limit_reason_is_written_once_while_it_stays_the_same() -> None:
    keep = SnapshotCache()
    load([task("a", i, limit=1) for i in range(3)], keep)
    memo: dict[str, tuple[object, ...]] = {}
    first = reason_changes(Decisions(), T0, memo, keep.gated)
    assert sorted((r.job_id, r.blocker) for r in first.reasons) == [("a_1", "array-limit"), ("a_2", "array-limit")]
    load([task("a", 0, "running", limit=1), task("a", 1, limit=1), task("a", 2, limit=1)], keep)
    assert reason_changes(Decisions(), T0 + 5, memo, keep.gated).reasons == []  # a_0 runs: same text, no rewrite
