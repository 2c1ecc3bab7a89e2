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

import base64
import binascii
from typing import Literal

from sqlalchemy import and_, func, or_, select, tuple_

from allotment.core.jobstate import JobState
from allotment.service.context import Context
from allotment.service.dashboard_views import QueuedJob, QueuePage
from allotment.service.errors import BadRequest, Invalid
from allotment.service.explain import wait_fields
from allotment.service.jobs import MAX_PAGE, summary
from allotment.service.principal import Principal
from allotment.store.db import reading
from allotment.store.tables import JobRow, PendingReasonRow


def _encode(submitted_at: int, job_id: str) -> str:
    return base64.urlsafe_b64encode(f"q:{submitted_at}:{job_id}".encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[int, str]:
    try:
        tag, at, job_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(":", 2)
        if tag != "q":
            raise ValueError(tag)
        return int(at), job_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest(f"cursor {cursor!r} is not one this server handed out") from None


NO_ESTIMATE = 1 << 53
"""Sorts jobs without an estimated start after every job with one."""

Order = Literal["submitted", "schedule"]


def _encode_start(start: int, submitted_at: int, job_id: str) -> str:
    return base64.urlsafe_b64encode(f"s:{start}:{submitted_at}:{job_id}".encode()).decode().rstrip("=")


def _decode_start(cursor: str) -> tuple[int, int, str]:
    try:
        tag, start, at, job_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(":", 3)
        if tag != "s":
            raise ValueError(tag)
        return int(start), int(at), job_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest(f"cursor {cursor!r} is not one this server handed out") from None


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
            key = _decode_start(cursor)
            stmt = stmt.where(tuple_(start, JobRow.submitted_at, JobRow.id) > tuple_(*key))
    else:
        stmt = stmt.order_by(JobRow.submitted_at, JobRow.id)
        if cursor:
            at, job_id = _decode(cursor)
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
            next_cursor = _encode_start(at, last.submitted_at, last.id)
        else:
            next_cursor = _encode(last.submitted_at, last.id)
    return QueuePage(total=total, items=items, next_cursor=next_cursor)
