"""/jobs job control: cancel by filter (POST /jobs/cancel).

Owns: the HTTP shape of the job-control use cases (status codes, bodies).
Must not: hold rules: service.jobcontrol does.
"""

from __future__ import annotations

from fastapi import APIRouter

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.service import jobcontrol

router = APIRouter(prefix="/jobs", tags=["jobs"], responses=ERROR_RESPONSES)


@router.post("/cancel", response_model=jobcontrol.CancelReport)
def cancel_matching(body: jobcontrol.CancelFilter, ctx: Ctx, caller: Caller) -> jobcontrol.CancelReport:
    """Ask the engine to cancel every active job the filter names (user, budget, states, name; at least one). A
    non-administrator cancels only their own jobs (naming another user is 403). `dry_run` reports and changes
    nothing. The report lists every matching job and how many requests this call recorded."""
    return jobcontrol.cancel_matching(ctx, caller, body)
