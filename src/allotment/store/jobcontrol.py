"""Writing job-control requests: cancellation of every active job matching a filter (the engine acts on it in its
next cycle, as for one job).

Owns: the query that selects the active jobs a filter names (user, budget, states, name) in a stable order, the
tasks of a job array by index, and marking cancellation requests in the caller's transaction.
Must not: decide who may cancel what (service.jobcontrol does) or start, stop or place anything (the engine is the
single writer of scheduling state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.core.jobstate import ACTIVE_ORDERED
from allotment.core.model import Seconds
from allotment.store.tables import JobRow


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which active jobs: every given field must match (None or empty: any)."""

    user: str | None = None
    budget: str | None = None
    states: Sequence[str] = ()
    name: str | None = None


def active_matching(session: Session, where: JobFilter, *, lock: bool = False) -> list[JobRow]:
    """The active jobs `where` names, oldest submission first (row locks with `lock`, on databases that have them)."""
    states = sorted(set(where.states)) if where.states else [s.value for s in ACTIVE_ORDERED]
    stmt = select(JobRow).where(JobRow.state.in_(states)).order_by(JobRow.submitted_at, JobRow.id)
    if where.user is not None:
        stmt = stmt.where(JobRow.user == where.user)
    if where.budget is not None:
        stmt = stmt.where(JobRow.budget == where.budget)
    if where.name is not None:
        stmt = stmt.where(JobRow.name == where.name)
    if lock:
        stmt = stmt.with_for_update()
    return list(session.scalars(stmt))


def array_tasks(session: Session, array_id: str, *, lock: bool = False) -> list[JobRow]:
    """The tasks of a job array by index (row locks with `lock`, on databases that have them); empty: no such
    array."""
    stmt = select(JobRow).where(JobRow.array_id == array_id).order_by(JobRow.array_index)
    if lock:
        stmt = stmt.with_for_update()
    return list(session.scalars(stmt))


def array_indices(session: Session, array_id: str) -> list[int]:
    """The indices of a job array's tasks, ascending."""
    stmt = select(JobRow.array_index).where(JobRow.array_id == array_id).order_by(JobRow.array_index)
    return [i for i in session.scalars(stmt) if i is not None]


def request_cancel_all(session: Session, rows: Sequence[JobRow], now: Seconds) -> int:
    """Mark the cancellation of each row not yet asked to cancel; returns how many were newly marked. Commits
    nothing: the caller owns the transaction."""
    marked = 0
    for row in rows:
        if row.cancel_requested_at is None:
            row.cancel_requested_at = now
            marked += 1
    return marked
