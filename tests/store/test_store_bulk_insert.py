"""A batch of new jobs reads back the same whichever way it was written: an executemany INSERT (every batch on
SQLite, small ones on PostgreSQL) or PostgreSQL's COPY (store.bulk, from COPY_ROWS rows on). Text that COPY's format
must escape (tabs, newlines, backslashes, quotes, non-ASCII) and JSON columns round-trip exactly, and every task
gets its first history record."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from allotment.config.arrays import ArrayRange
from allotment.store.bulk import COPY_ROWS
from allotment.store.jobs import Submission, submit_many
from allotment.store.tables import JobEventRow, JobRow
from tests.store.support import T0, seed_org

AWKWARD = {"TAB": "a\tb", "NEWLINE": "a\nb", "BACKSLASH": "C:\\path\\N", "QUOTES": "'\"", "UNICODE": "Grüße ✓"}
IGNORED = {"id", "request_id", "array_id", "array_index", "spec"}


def submission(tasks: int, request_id: str) -> Submission:
    return Submission(
        "detect", "ada", ["python", "-c", "print('\\t\\n')", "a\tb"], gpus=1, name="sweep\tone", env=AWKWARD,
        gpu_types=("h100",), clusters=("c1",), max_runtime=5400, cpus=4, memory=8192, request_id=request_id,
        array=ArrayRange(tuple(range(tasks)), 5), hold="user",
    )  # fmt: skip


def columns(row: JobRow) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in JobRow.__table__.columns if c.key not in IGNORED}


@pytest.mark.parametrize("tasks", [pytest.param(3, id="small-batch"), pytest.param(COPY_ROWS + 50, id="copy-sized")])
def test_a_batch_reads_back_as_written_by_either_path(session: Session, tasks: int) -> None:
    seed_org(session)
    [(first, created)] = submit_many(session, [submission(tasks, f"req-{tasks}")], T0)
    session.commit()
    assert created
    rows = list(session.scalars(select(JobRow).where(JobRow.array_id == first.array_id).order_by(JobRow.array_index)))
    assert [r.array_index for r in rows] == list(range(tasks))
    assert [r.id for r in rows] == [f"{first.array_id}_{i}" for i in range(tasks)]
    assert [r.request_id for r in rows] == [f"req-{tasks}"] + [None] * (tasks - 1)
    expected = {
        "budget": "detect", "user": "ada", "name": "sweep\tone", "gpus": 1, "replicas": 1, "gpu_types": ["h100"],
        "clusters": ["c1"], "max_runtime": 5400, "cpus": 4, "memory_mib": 8192, "hold": "user", "state": "pending",
        "submitted_at": T0, "array_limit": 5, "dependency": None, "cancel_requested_at": None,
    }  # fmt: skip
    for row in rows:
        got = columns(row)
        assert {k: got[k] for k in expected} == expected
        assert row.spec["command"] == ["python", "-c", "print('\\t\\n')", "a\tb"]
        assert row.spec["env"] == AWKWARD
        assert row.spec["array"] == {"id": first.array_id, "index": row.array_index, "count": tasks, "min": 0,
                                     "max": tasks - 1}  # fmt: skip
    events = session.scalar(
        select(func.count()).select_from(JobEventRow).where(JobEventRow.job_id.in_([r.id for r in rows]))
    )
    assert events == tasks


def test_copy_and_insert_write_the_same_columns(session: Session) -> None:
    """Every column but the ids is the same for a task written by COPY and one written by INSERT (on SQLite both
    are INSERTs: the comparison still holds)."""
    seed_org(session)
    [(small, _)] = submit_many(session, [submission(2, "small")], T0)
    [(big, _)] = submit_many(session, [submission(COPY_ROWS, "big")], T0)
    session.commit()
    by_insert = session.get_one(JobRow, f"{small.array_id}_1")
    by_copy = session.get_one(JobRow, f"{big.array_id}_1")
    different = {k for k in columns(by_insert) if columns(by_insert)[k] != columns(by_copy)[k]}
    assert different == set()
    assert {k: v for k, v in by_insert.spec.items() if k != "array"} == {
        k: v for k, v in by_copy.spec.items() if k != "array"
    }
