"""The snapshot loader both stores share reads a job again when an update raised its revision (service.jobedit):
the core always sees what a pending job asks for now, and a job whose revision is unchanged is not read again."""

from __future__ import annotations

from allotment.changes.snapshot import ActiveRow, SnapshotCache
from allotment.core.model import Job
from tests.changes.support import loaded


class Table:
    """The jobs as a store holds them now, and which ids each load asked for."""

    def __init__(self) -> None:
        self.jobs = {"a": Job("a", "lab", "ann", 8), "b": Job("b", "lab", "ann", 4)}
        self.asked: list[list[str]] = []

    def fill(self, ids: list[str], cache: dict[str, Job]) -> None:
        self.asked.append(sorted(ids))
        cache.update((i, self.jobs[i]) for i in ids)

    def load(self, active: list[ActiveRow], keep: SnapshotCache) -> dict[str, Job]:
        snap = loaded(active, keep, self.fill)
        return {j.id: j for j in snap.jobs}


def test_an_updated_job_is_read_again_and_an_unchanged_one_is_not() -> None:
    table, keep = Table(), SnapshotCache()
    first = table.load(
        [("a", "pending", False, None, 0, False, None, None), ("b", "pending", False, None, 0, False, None, None)], keep
    )
    assert first["a"].gpus == 8 and table.asked == [["a", "b"]]
    table.load(
        [("a", "pending", False, None, 0, False, None, None), ("b", "pending", False, None, 0, False, None, None)], keep
    )
    assert table.asked == [["a", "b"]]  # nothing changed: nothing read
    table.jobs["a"] = Job("a", "lab", "ann", 2, priority=7)  # an update wrote the row and raised its revision
    updated = table.load(
        [("a", "pending", False, None, 1, False, None, None), ("b", "pending", False, None, 0, False, None, None)], keep
    )
    assert (updated["a"].gpus, updated["a"].priority) == (2, 7)
    assert table.asked == [["a", "b"], ["a"]]
    table.load(
        [("a", "pending", False, None, 1, False, None, None), ("b", "pending", False, None, 0, False, None, None)], keep
    )
    assert table.asked == [["a", "b"], ["a"]]  # read once per revision
