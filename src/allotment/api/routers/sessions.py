"""/sessions: request an interactive session, see how to attach, release it.

Owns: the HTTP shape of the session use cases. Must not: hold rules (service.sessions does).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.api.limits import Submitter
from allotment.api.routers.jobs import request_key
from allotment.api.schemas import SessionBody
from allotment.service import sessions
from allotment.service.views import JobSummary, SessionView

router = APIRouter(prefix="/sessions", tags=["sessions"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, response_model=SessionView)
def request_session(
    body: SessionBody,
    ctx: Ctx,
    caller: Submitter,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> SessionView:
    """Request a session; poll GET /sessions/{id} until `ready` to get the attach information."""
    request = sessions.SessionRequest.model_validate(body.model_dump(exclude={"request_id"}))
    return sessions.request_session(ctx, caller, request, request_key(body.request_id, idempotency_key))


@router.get("/{job_id}", response_model=SessionView)
def get_session(job_id: str, ctx: Ctx, caller: Caller) -> SessionView:
    return sessions.get_session(ctx, caller, job_id)


@router.delete("/{job_id}", response_model=JobSummary)
def release(job_id: str, ctx: Ctx, caller: Caller) -> JobSummary:
    """Release the session: its GPUs go back to the fleet."""
    return sessions.release_session(ctx, caller, job_id)
