"""The pending queue as the dashboard and `allot queue` show it: each pending job with the reason the engine's last
cycle recorded (blocker, message, GPUs needed and free, estimated start, hints on what would help), page by page,
oldest first (the dashboard) or in scheduling order (`GET /jobs/queue`): by estimated start, jobs with none after
those with one, then by submission. The engine stores no rank of its own, so the estimated start is the order it
will start them in as far as it knows.

Owns: one paged query (pending jobs LEFT JOIN their reasons, in either order) and a count of the matching pending
jobs, so a queue of tens of thousands is never loaded whole. The queue and its reasons are visible to every
user, as the queue is (`GET /jobs`): fair share and the reasons are about the shared fleet; a job's spec, logs and
charges stay behind the job's own rights (`GET /jobs/{id}`).

Must not: compute a reason itself (the core explains; the engine records), or write anything.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import and_, func, or_, select, tuple_

from allotment.core.jobstate import JobState
from allotment.service import cursors
from allotment.service.context import Context
from allotment.service.dashboard_views import QueuedJob, QueuePage
from allotment.service.errors import Invalid
from allotment.service.explain import wait_fields
from allotment.service.jobs import MAX_PAGE, summary
from allotment.service.principal import Principal
from allotment.store.db import reading
from allotment.store.tables import JobRow, PendingReasonRow

NO_ESTIMATE = 1 << 53
"""Sorts jobs without an estimated start after every job with one."""

Order = Literal["submitted", "schedule"]


def pending_queue(
    ctx: Context,
    principal: Principal,
    *,
    budget: str | None = None,
    user: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    order: Order = "submitted",
) -> QueuePage:
    """Pending jobs, oldest first or in scheduling order, each with why it waits; `cursor` continues the listing."""
    if not 1 <= limit <= MAX_PAGE:
        raise Invalid.of("limit", f"must be between 1 and {MAX_PAGE}")
    filters = [JobRow.state == JobState.PENDING]
    if budget is not None:
        filters.append(JobRow.budget == budget)
    if user is not None:
        filters.append(JobRow.user == user)
    start = func.coalesce(PendingReasonRow.estimated_start, NO_ESTIMATE)
    stmt = (
        select(JobRow, PendingReasonRow)
        .outerjoin(PendingReasonRow, PendingReasonRow.job_id == JobRow.id)
        .where(*filters)
        .limit(limit + 1)
    )
    if order == "schedule":
        stmt = stmt.order_by(start, JobRow.submitted_at, JobRow.id)
        if cursor:
            (after, at), job_id = cursors.decode(cursor, "s", 2)
            stmt = stmt.where(tuple_(start, JobRow.submitted_at, JobRow.id) > tuple_(after, at, job_id))
    else:
        stmt = stmt.order_by(JobRow.submitted_at, JobRow.id)
        if cursor:
            (at,), job_id = cursors.decode(cursor, "q", 1)
            stmt = stmt.where(or_(JobRow.submitted_at > at, and_(JobRow.submitted_at == at, JobRow.id > job_id)))
    with reading(ctx.sessions) as session:
        total = int(session.scalar(select(func.count()).select_from(JobRow).where(*filters)) or 0)
        rows = [(job, reason) for job, reason in session.execute(stmt)]
    more = len(rows) > limit
    rows = rows[:limit]
    items = [QueuedJob(**summary(job).model_dump(), **wait_fields(job, reason)) for job, reason in rows]
    next_cursor = None
    if more and rows:
        last, reason = rows[-1]
        if order == "schedule":
            estimated = reason.estimated_start if reason is not None else None
            at = NO_ESTIMATE if estimated is None else estimated
            next_cursor = cursors.encode("s", at, last.submitted_at, job_id=last.id)
        else:
            next_cursor = cursors.encode("q", last.submitted_at, job_id=last.id)
    return QueuePage(total=total, items=items, next_cursor=next_cursor)
