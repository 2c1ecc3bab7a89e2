"""/jobs job control: cancel by filter (POST /jobs/cancel), hold and release (POST /jobs/{id}/hold, /release),
update a pending job (PATCH /jobs/{id}), requeue a running one (POST /jobs/{id}/requeue).

Owns: the HTTP shape of the job-control use cases (status codes, bodies).
Must not: hold rules: service.jobcontrol, service.holds, service.jobedit and service.requeues do.
"""

from __future__ import annotations

from fastapi import APIRouter

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.service import holds, jobcontrol, jobedit, requeues
from allotment.service.views import JobSummary, JobUpdated

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=ERROR_RESPONSES)


@router.post("/cancel", response_model=jobcontrol.CancelReport)
def cancel_matching(body: jobcontrol.CancelFilter, ctx: Ctx, caller: Caller) -> jobcontrol.CancelReport:
    """Ask the engine to cancel every active job the filter names (user, budget, states, name; at least one). A
    non-administrator cancels only their own jobs (naming another user is 403). `dry_run` reports and changes
    nothing. The report lists every matching job and how many requests this call recorded."""
    return jobcontrol.cancel_matching(ctx, caller, body)


@router.post("/{job_id}/hold", response_model=JobSummary)
def hold(job_id: str, ctx: Ctx, caller: Caller, body: holds.HoldRequest | None = None) -> JobSummary:
    """Hold a pending job (scontrol hold): the scheduler does not consider it until it is released, and its reason
    says which hold. `kind`: `user` (anyone who may manage the job) or `admin` (administrators only; only an
    administrator releases it); omitted, an administrator sets an admin hold and anyone else a user hold. A job
    that is not pending is 409."""
    return holds.hold_job(ctx, caller, job_id, body)


@router.post("/{job_id}/release", response_model=JobSummary)
def release(job_id: str, ctx: Ctx, caller: Caller) -> JobSummary:
    """Release a held job (scontrol release): it is considered again from the next cycle. An admin hold is released
    by an administrator only (403 otherwise); releasing a pending job that is not held changes nothing."""
    return holds.release_job(ctx, caller, job_id)


@router.patch("/{job_id}", response_model=JobUpdated)
def update(job_id: str, body: jobedit.JobUpdate, ctx: Ctx, caller: Caller) -> JobUpdated:
    """Update a pending job (scontrol update job): priority (within its budget), GPUs, replicas, slice, time limit
    (`max_runtime`), GPU types, clusters or name; fields left out stay. The job as updated passes every check a
    submission does (422 naming the field, and nothing changes); only a pending job is updated (409); who may: as
    cancel. The answer lists each field's before and after; the engine sees the change in its next cycle."""
    return jobedit.update_job(ctx, caller, job_id, body)


@router.post("/{job_id}/requeue", response_model=JobSummary)
def requeue(job_id: str, ctx: Ctx, caller: Caller, body: requeues.RequeueRequest | None = None) -> JobSummary:
    """Requeue a running batch job (scontrol requeue): the engine's next cycle stops its run with the job's grace
    (SIGTERM, then SIGKILL) and puts it back in the queue with the same id; what the run used stays charged. `hold`:
    put it back held (scontrol requeuehold; an administrator's hold is an admin hold). A job that is not running, is
    being cancelled, or is a session is 409; who may: as cancel. `requeues` counts the requests."""
    return requeues.requeue_job(ctx, caller, job_id, body)
