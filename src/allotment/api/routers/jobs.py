"""/jobs: submit, list, the pending queue in scheduling order, the history of finished jobs, show, cancel, logs and why.

Owns: the HTTP shape of the job use cases (status codes, query parameters, the Idempotency-Key header).
Must not: hold rules: service.jobs and service.explain do.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.api.limits import Submitter
from allotment.api.schemas import SubmitRequest
from allotment.config.limits import MAX_COUNT, MAX_OFFSET
from allotment.service import dependencies, explain, history, jobs, queueview
from allotment.service.dashboard_views import QueuePage
from allotment.service.errors import BadRequest
from allotment.service.intake import Intake
from allotment.service.specs import parse_spec_document, spec_from_data, with_array
from allotment.service.views import HistoryPage, JobDetail, JobPage, JobSummary, LogChunk, Submitted, WhyView

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=ERROR_RESPONSES)


def request_key(body_key: str | None, header_key: str | None) -> str | None:
    if body_key is not None and header_key is not None and body_key != header_key:
        raise BadRequest("the Idempotency-Key header and request_id differ")
    return body_key if body_key is not None else header_key


@router.post("", status_code=201, response_model=Submitted)
async def submit(
    body: SubmitRequest,
    request: Request,
    caller: Submitter,
    response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Submitted:
    """Submit a job spec (as an object or YAML text); `dependency` beside it replaces the spec's (sbatch
    --dependency). Returns 201 for a new job, 200 for a retried request.
    Submissions arriving together are written in one transaction (service.intake). Rate limited per user (429
    with Retry-After); a user in no budget is refused (403) before the spec is read. A spec with `array` (or the
    body's `array`, which overrides it) creates a job array: every task in the one transaction, the answer's
    `array` naming it and `job` its first task; a retry with the request id creates none again."""
    if (body.spec is None) == (body.yaml is None):
        raise BadRequest("give the job spec as either `spec` (an object) or `yaml` (text)")
    if body.yaml is not None:
        doc = await run_in_threadpool(parse_spec_document, body.yaml)
    else:
        doc = spec_from_data(body.spec)
    if body.array is not None:
        doc = with_array(doc, body.array)
    if body.dependency is not None:
        doc = dependencies.with_dependency(doc, body.dependency)
    intake = request.app.state.intake
    assert isinstance(intake, Intake)
    result = await intake.submit(jobs.SubmitRequest(caller, doc, request_key(body.request_id, idempotency_key)))
    if not result.created:
        response.status_code = 200
    return result


@router.get("", response_model=JobPage)
def list_jobs(
    ctx: Ctx,
    caller: Caller,
    state: Annotated[list[str] | None, Query(description="Repeat to match several states")] = None,
    budget: str | None = None,
    user: str | None = None,
    kind: str | None = None,
    limit: Annotated[int, Query(ge=1, le=jobs.MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> JobPage:
    """Jobs newest first; `next_cursor` continues the listing."""
    return jobs.list_jobs(
        ctx, caller, states=state or (), budget=budget, user=user, kind=kind, limit=limit, cursor=cursor
    )


@router.get("/queue", response_model=QueuePage)
def pending_queue(
    ctx: Ctx,
    caller: Caller,
    budget: str | None = None,
    user: str | None = None,
    limit: Annotated[int, Query(ge=1, le=jobs.MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> QueuePage:
    """Pending jobs in scheduling order: by the estimated start the engine's last cycle wrote (jobs without one
    last), then by submission; each with its blocker, message, GPUs needed and free, and hints."""
    return queueview.pending_queue(ctx, caller, budget=budget, user=user, limit=limit, cursor=cursor, order="schedule")


@router.get("/history", response_model=HistoryPage)
def job_history(
    ctx: Ctx,
    caller: Caller,
    since: Annotated[int | None, Query(ge=0, le=MAX_OFFSET, description="Unix seconds (until - 1 day)")] = None,
    until: Annotated[int | None, Query(ge=0, le=MAX_OFFSET, description="Unix seconds (default: now)")] = None,
    user: str | None = None,
    budget: str | None = None,
    state: Annotated[list[str] | None, Query(description="A finished state; repeat for several")] = None,
    limit: Annotated[int, Query(ge=1, le=jobs.MAX_PAGE)] = 100,
    cursor: str | None = None,
) -> HistoryPage:
    """Finished jobs that ended in [since, until), newest end first (sacct): elapsed time, GPU-seconds, net credits
    charged and the last exit code; only jobs the caller may see (their own, and their budgets' as for a job's
    detail)."""
    return history.job_history(
        ctx, caller, since=since, until=until, user=user, budget=budget, states=state or (), limit=limit, cursor=cursor
    )


@router.get("/{job_id}", response_model=JobDetail)
def get_job(job_id: str, ctx: Ctx, caller: Caller) -> JobDetail:
    """A job with its state history, runs, slices and charges."""
    return jobs.get_job(ctx, caller, job_id)


@router.post("/{job_id}/cancel", response_model=JobSummary)
def cancel(job_id: str, ctx: Ctx, caller: Caller) -> JobSummary:
    """Ask the engine to cancel the job (the owner, a lead of its budget's subtree, or an administrator)."""
    return jobs.cancel_job(ctx, caller, job_id)


@router.get("/{job_id}/logs", response_model=LogChunk)
def logs(
    job_id: str,
    ctx: Ctx,
    caller: Caller,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    attempt: Annotated[int | None, Query(ge=0, le=MAX_COUNT)] = None,
    limit: Annotated[int, Query(ge=1, le=explain.MAX_CHUNK)] = 65536,
    replica: Annotated[int | None, Query(ge=0, description="Only this replica's output (default: all)")] = None,
) -> LogChunk:
    """The attempt's output from byte `offset`; call again with `next_offset` to follow until `complete`. A gang's
    output has each replica's lines labelled `N: `; `replica` gives one replica's own output instead."""
    return explain.read_logs(ctx, caller, job_id, offset=offset, attempt=attempt, limit=limit, replica=replica)


@router.get("/{job_id}/why", response_model=WhyView)
def why(job_id: str, ctx: Ctx, caller: Caller) -> WhyView:
    """Why a pending job waits (the blocker in numbers, its estimated start, hints and its budget's standing), or a
    running job's outlook in `run` (slice end, whether it is preemptible now, its notice and what could preempt it).
    `job_id` may also be the job's name: unique among the caller's visible live jobs (else among all visible jobs);
    an ambiguous name gets 409 listing the candidates; a finished job 404."""
    return explain.why(ctx, caller, job_id)
