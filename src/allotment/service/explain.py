"""Explaining a job: its output (logs) and why it waits.

Owns: reading an attempt's output as the local executor's supervisor wrote it (`<data_dir>/executor/jobs/<job_id>/
<attempt>/`: every replica, labelled for a gang, or one replica's own) from a byte offset, so clients can follow it
(allotment.executors.local.output opens the files and refuses anything a job put in their place); and `why`: the
pending reason the engine's last cycle wrote (blocker, numbers, estimated start, hints) with the budget's standing now
(allocation, balance less what running jobs have accrued, what granted slices have committed) and, for a session,
the session room of each cluster it may use; for a running job, its outlook (slice end, whether it is preemptible
now, with what notice and by what); and finding a job by its id or its name.

Must not: write anything, or compute a reason itself (the core explains; the engine records).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.core.decisions import PreemptReason
from allotment.core.jobstate import JobState
from allotment.core.model import JobKind, RunClass
from allotment.core.preemption import reasons_that_may_take
from allotment.core.units import cost
from allotment.executors.local.output import UntrustedOutput, output_name, read_output
from allotment.service.context import Context
from allotment.service.errors import Conflict, FieldProblem, Invalid, NotFound
from allotment.service.fleetmap import session_rooms
from allotment.service.jobs import visible_job
from allotment.service.outlook import class_of
from allotment.service.principal import Principal, budget_parents
from allotment.service.views import Hint, LogChunk, RunOutlook, SessionRoomView, Standing, WhyView
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


LIVE = frozenset({JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING})
SHOWN_CANDIDATES = 10


def find_job(session: Session, principal: Principal, ref: str) -> JobRow:
    """The job `ref` names: its id, else its name among the jobs the principal may see, preferring the live ones
    (pending, running, preempting) so a reused name still finds the job that waits or runs. Conflict when the name
    matches several (listing them); NotFound when nothing matches."""
    if session.get(JobRow, ref) is not None:
        return visible_job(session, principal, ref)
    parents = budget_parents(session)
    named = [
        row
        for row in session.scalars(
            select(JobRow).where(JobRow.name == ref).order_by(JobRow.submitted_at.desc(), JobRow.id.desc())
        )
        if row.user == principal.user or principal.may_view_budget_jobs(row.budget, parents)
    ]
    if not named:
        raise NotFound(f"no job with the id or name {ref!r}")
    live = [row for row in named if row.state in LIVE]
    candidates = live or named
    if len(candidates) == 1:
        return candidates[0]
    shown = ", ".join(f"{r.id} ({r.state}, {r.user}/{r.budget})" for r in candidates[:SHOWN_CANDIDATES])
    more = f" and {len(candidates) - SHOWN_CANDIDATES} more" if len(candidates) > SHOWN_CANDIDATES else ""
    raise Conflict(
        f"the name {ref!r} matches {len(candidates)} {'live ' if live else ''}jobs: {shown}{more}; give the job id",
        [FieldProblem("job", f"ambiguous name: {len(candidates)} jobs are called {ref!r}", None)],
    )


def why(ctx: Context, principal: Principal, ref: str) -> WhyView:
    """Why a pending job waits, in numbers, or what protects a running one and what could preempt it and when.
    `ref` is the job's id or its name (find_job). NotFound when the job has finished."""
    now = ctx.now()
    with reading(ctx.sessions) as session:
        job = find_job(session, principal, ref)
        if job.state not in LIVE:
            raise NotFound(f"job {job.id} is neither pending nor running (it is {job.state}): see allot status")
        money = standing(session, ctx, job.budget)
        if job.state == JobState.PENDING:
            reason = session.get(PendingReasonRow, job.id)
            rooms = _rooms_for(session, job) if job.kind == JobKind.SESSION.value else []
            return WhyView(
                job_id=job.id, name=job.name, state=job.state, **wait_fields(job, reason), standing=money, rooms=rooms
            )
        run = session.scalars(select(RunRow).where(RunRow.job_id == job.id, RunRow.ended_at.is_(None))).first()
    outlook = _outlook(job, run, now, ctx.policy.max_grace) if run is not None else None
    return WhyView(
        job_id=job.id,
        name=job.name,
        state=job.state,
        blocker=None,
        message=_running_message(job, outlook),
        needed_gpus=job.gpus * job.replicas,
        free_gpus=0,
        estimated_start=None,
        hints=[],
        explained_at=None,
        standing=money,
        run=outlook,
    )


def _outlook(job: JobRow, run: RunRow, now: int, max_grace: int) -> RunOutlook:
    notice = max(0, min(job.grace, max_grace))
    in_slice = run.slice_end is not None and run.slice_end > now
    leaving = job.state == JobState.PREEMPTING or run.signalled_at is not None
    if leaving:
        now_ok, start, by = False, None, []
    elif run.run_class == RunClass.SESSION:
        now_ok, start, by = False, None, [PreemptReason.IDLE_SESSION]
    elif run.run_class == RunClass.GUARANTEED and in_slice:
        now_ok, start, by = False, run.slice_end, list(reasons_that_may_take(opportunistic=False, slice_expired=True))
    elif run.run_class == RunClass.GUARANTEED:
        now_ok, start, by = True, None, list(reasons_that_may_take(opportunistic=False, slice_expired=True))
    else:
        now_ok, start, by = True, None, list(reasons_that_may_take(opportunistic=True, slice_expired=False))
    return RunOutlook(
        attempt=run.attempt,
        run_class=run.run_class,
        started_at=run.started_at,
        slice_end=run.slice_end,
        preemptible_now=now_ok,
        preemptible_from=start,
        notice=notice,
        preemptible_by=[str(b) for b in by],
        leaving_at=run.kill_at if leaving else None,
        began_as=class_of(run).began_as,
        class_since=class_of(run).class_since,
    )


def _iso(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running_message(job: JobRow, o: RunOutlook | None) -> str:
    """One sentence on what protects the running job; the CLI renders the same fields in local time."""
    if o is None:
        return f"{job.state}: {job.state_reason}"
    if o.leaving_at is not None or job.state == JobState.PREEMPTING:
        return f"leaving: {job.state_reason}" + (f"; killed at {_iso(o.leaving_at)}" if o.leaving_at else "")
    if o.run_class == RunClass.SESSION:
        end = f" until {_iso(o.slice_end)}" if o.slice_end is not None else ""
        return f"a session holding its GPUs{end}; reclaimed earlier only if it stays idle past the idle limit"
    better = "by work with a better claim (a budget below its fair share, a session, a capacity window, a reservation)"
    if o.preemptible_from is not None:
        return (
            f"in its guaranteed slice until {_iso(o.preemptible_from)}; then renewed if its budget funds another "
            f"slice, else it may be preempted with {o.notice}s notice {better}"
        )
    if o.run_class == RunClass.GUARANTEED:
        return f"its slice has ended: it may be preempted now with {o.notice}s notice {better}"
    return (
        f"opportunistic: it may be preempted at any cycle with {o.notice}s notice by guaranteed work, a session, "
        "a capacity window or a reservation"
    )


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
