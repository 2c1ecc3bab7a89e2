"""The eligibility gate (changes/eligibility.py) through the snapshot loader both stores share: a held pending job
is kept out of the snapshot decide() sees, with a reason naming its hold, and that reason is written like any
other; a job without a hold, or a cancelled one, is unaffected."""

from __future__ import annotations

import pytest

from allotment.changes.snapshot import ActiveRow, SnapshotCache
from allotment.changes.steps import reason_changes
from allotment.core.decisions import Blocker, Decisions
from allotment.core.model import Job
from tests.changes.support import T0, loaded

JOBS = {jid: Job(jid, "lab", "ann", 8, replicas=2) for jid in ("a", "b", "c")}


def snapshot(active: list[ActiveRow], keep: SnapshotCache) -> tuple[str, ...]:
    snap = loaded(active, keep, JOBS)
    return tuple(j.id for j in snap.jobs)


CASES = [
    pytest.param([("a", "pending", False, None, 0, False, None, None)], ("a",), {}, id="no-hold-is-scheduled"),
    pytest.param(
        [("a", "pending", False, "user", 0, False, None, None)], (), {"a": "user hold"}, id="user-hold-kept-out"
    ),
    pytest.param(
        [("a", "pending", False, "admin", 0, False, None, None)], (), {"a": "admin hold"}, id="admin-hold-kept-out"
    ),
    pytest.param(
        [("a", "pending", True, "user", 0, False, None, None)], (), {}, id="cancelled-while-held-is-cancelled-not-gated"
    ),
    pytest.param(
        [
            ("a", "pending", False, "user", 0, False, None, None),
            ("b", "pending", False, None, 0, False, None, None),
            ("c", "pending", False, "admin", 0, False, None, None),
        ],
        ("b",),
        {"a": "user hold", "c": "admin hold"},
        id="only-the-held-ones",
    ),
]


@pytest.mark.parametrize(("active", "seen", "held"), CASES)
def test_held_jobs_are_kept_out_with_their_reason(
    active: list[ActiveRow], seen: tuple[str, ...], held: dict[str, str]
) -> None:
    keep = SnapshotCache()
    assert snapshot(active, keep) == seen
    assert set(keep.gated) == set(held)
    assert all(held[j] in r.message for j, r in keep.gated.items())
    assert all(r.blocker is Blocker.HELD and r.needed_gpus == 16 for r in keep.gated.values())


def test_a_gated_reason_is_written_and_rewritten_only_when_it_changes() -> None:
    keep = SnapshotCache()
    snapshot([("a", "pending", False, "user", 0, False, None, None)], keep)
    memo: dict[str, tuple[object, ...]] = {}
    first = reason_changes(Decisions(), T0, memo, keep.gated)
    assert [(r.job_id, r.blocker) for r in first.reasons] == [("a", "held")]
    assert reason_changes(Decisions(), T0 + 5, memo, keep.gated).reasons == []  # unchanged: not rewritten
    snapshot([("a", "pending", False, "admin", 0, False, None, None)], keep)
    again = reason_changes(Decisions(), T0 + 10, memo, keep.gated)
    assert [r.job_id for r in again.reasons] == ["a"] and "admin hold" in again.reasons[0].message
