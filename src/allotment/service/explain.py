"""Explaining a job: its output (logs) and why it waits.

Owns: reading an attempt's output as the local executor's supervisor wrote it (`<data_dir>/executor/jobs/<job_id>/
<attempt>/`: every replica, labelled for a gang, or one replica's own) from a byte offset, so clients can follow it
(allotment.executors.local.output opens the files and refuses anything a job put in their place); and `why`: the
pending reason the engine's last cycle wrote (blocker, numbers, estimated start, hints) with the budget's standing now
(allocation, balance less what running jobs have accrued, what granted slices have committed) and, for a session,
the session room of each cluster it may use.

Must not: write anything, or compute a reason itself (the core explains; the engine records).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.core.jobstate import JobState
from allotment.core.model import JobKind
from allotment.core.units import cost
from allotment.executors.local.output import UntrustedOutput, output_name, read_output
from allotment.service.context import Context
from allotment.service.errors import Conflict, FieldProblem, Invalid, NotFound
from allotment.service.fleetmap import session_rooms
from allotment.service.jobs import visible_job
from allotment.service.principal import Principal
from allotment.service.views import Hint, LogChunk, SessionRoomView, Standing, WhyView
from allotment.store.accounts import balances
from allotment.store.db import reading
from allotment.store.records import FINAL_STATES
from allotment.store.snapshot import unposted
from allotment.store.tables import BudgetRow, JobRow, PendingReasonRow, RunRow

MAX_CHUNK = 1 << 20


def _utf8_boundary(data: bytes) -> int:
    """The length of the longest prefix of `data` that does not end inside a UTF-8 sequence."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: keep looking for the lead byte
            continue
        if byte & 0x80 == 0:
            return len(data)
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return len(data) if back >= need else len(data) - back
    return len(data)


def read_logs(
    ctx: Context,
    principal: Principal,
    job_id: str,
    *,
    offset: int = 0,
    attempt: int | None = None,
    limit: int = 65536,
    replica: int | None = None,
) -> LogChunk:
    """Up to `limit` bytes of an attempt's output from byte `offset` (default: the latest attempt; every replica, each
    line of a gang labelled `N: `, or only `replica`'s own output). `next_offset` is where to continue in the same
    stream; `complete` says the attempt has ended and nothing more will come."""
    if offset < 0:
        raise Invalid.of("offset", "must not be negative")
    if not 1 <= limit <= MAX_CHUNK:
        raise Invalid.of("limit", f"must be between 1 and {MAX_CHUNK}")
    with reading(ctx.sessions) as session:
        job = visible_job(session, principal, job_id)
        runs = {r.attempt: r for r in session.scalars(select(RunRow).where(RunRow.job_id == job_id))}
        final = job.state in FINAL_STATES
        replicas = job.replicas
    if replica is not None and not 0 <= replica < replicas:
        raise Invalid.of("replica", f"must be between 0 and {replicas - 1}: job {job_id} has {replicas} replica(s)")
    if attempt is None:
        attempt = max(runs) if runs else None
    elif attempt not in runs:
        raise NotFound(f"job {job_id} has no attempt {attempt}")
    if attempt is None:
        return LogChunk(
            job_id=job_id, attempt=None, replica=replica, offset=offset, next_offset=offset, data="", complete=final
        )
    ended = runs[attempt].ended_at is not None
    try:
        chunk = read_output(ctx.executor_dir, job_id, attempt, output_name(replicas, replica), offset, limit)
    except UntrustedOutput as exc:
        reason = f"{exc}: something replaced the output file the supervisor writes, so nothing of it is shown"
        raise Conflict(
            f"the output of job {job_id}, attempt {attempt}, cannot be shown: {reason}",
            [FieldProblem("attempt", reason)],
        ) from None
    data = chunk.data
    if offset + len(data) < chunk.size:
        data = data[: _utf8_boundary(data)]
    next_offset = offset + len(data)
    return LogChunk(
        job_id=job_id,
        attempt=attempt,
        replica=replica,
        offset=offset,
        next_offset=next_offset,
        data=data.decode("utf-8", errors="replace"),
        complete=ended and next_offset >= chunk.size,
    )


def standing(session: Session, ctx: Context, budget: str) -> Standing:
    """A leaf budget's standing now: the ledger balance less what its open runs have accrued, and what the rest of
    their granted slices will cost."""
    now = ctx.now()
    row = session.get(BudgetRow, budget)
    allocation = row.allocation_micro if row is not None else 0
    balance = balances(session, ctx.period(now).id).get(budget, 0)
    committed = 0
    for rate, price, since, charged, slice_end in session.execute(
        select(RunRow.rate_micro, RunRow.price, RunRow.price_since, RunRow.charged_until, RunRow.slice_end)
        .join(JobRow, JobRow.id == RunRow.job_id)
        .where(JobRow.budget == budget, RunRow.ended_at.is_(None))
    ):
        balance -= unposted(rate, price, since, charged, now)
        if slice_end is not None and slice_end > now:
            committed += cost(1, rate, price, slice_end - now)
    return Standing(
        budget=budget,
        allocation_micro=allocation,
        balance_micro=balance,
        committed_micro=committed,
        available_micro=balance - committed,
    )


def why(ctx: Context, principal: Principal, job_id: str) -> WhyView:
    """Why a pending job waits, in numbers. NotFound when the job is not pending."""
    with reading(ctx.sessions) as session:
        job = visible_job(session, principal, job_id)
        if job.state != JobState.PENDING:
            raise NotFound(f"job {job_id} is not pending (it is {job.state})")
        reason = session.get(PendingReasonRow, job_id)
        money = standing(session, ctx, job.budget)
        rooms = _rooms_for(session, job) if job.kind == JobKind.SESSION.value else []
    return WhyView(job_id=job_id, state=job.state, **wait_fields(job, reason), standing=money, rooms=rooms)


def _rooms_for(session: Session, job: JobRow) -> list[SessionRoomView]:
    """The session rooms of the clusters a session may run on (all, when it names none)."""
    rooms = session_rooms(session)
    allowed = set(job.clusters or ())
    return [r for c, r in sorted(rooms.items()) if not allowed or c in allowed]


NOT_CONSIDERED = "the scheduler has not considered this job yet"


def wait_fields(job: JobRow, reason: PendingReasonRow | None) -> dict[str, Any]:
    """The fields of a waiting job's stored reason as views show them (WhyView, the dashboard's queue): blocker,
    message, GPUs needed and free, estimated start, hints and when it was explained; placeholders before the engine
    has considered the job."""
    if reason is None:
        return {
            "blocker": None,
            "message": NOT_CONSIDERED,
            "needed_gpus": job.gpus * job.replicas,
            "free_gpus": 0,
            "estimated_start": None,
            "hints": [],
            "explained_at": None,
        }
    return {
        "blocker": reason.blocker,
        "message": reason.message,
        "needed_gpus": reason.needed_gpus,
        "free_gpus": reason.free_gpus,
        "estimated_start": reason.estimated_start,
        "hints": [Hint(kind=h["kind"], detail=h["detail"], start=h.get("start")) for h in reason.hints or []],
        "explained_at": reason.at,
    }
