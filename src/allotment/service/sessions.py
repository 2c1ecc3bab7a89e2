"""Interactive sessions: request one, see how to attach, release it.

Owns: the SessionRequest (a small job of kind `session`: budget, GPUs, length, grace, optional command, placement
preferences; an omitted length or grace takes the policy's default, clamped, like any job's), turning it into a
job spec submitted like any other, and the attach information of a running session (its node, GPUs and the command
that reaches them). Releasing a session is cancelling its job.

Must not: start or attach anything itself: the engine starts sessions and the executor runs them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from allotment.config.fields import Duration, Name
from allotment.config.limits import MAX_ARGS
from allotment.core.jobstate import JobState
from allotment.core.model import JobKind, PolicyConfig
from allotment.service.context import Context
from allotment.service.errors import NotFound
from allotment.service.jobs import cancel_job, submit_job, summary, visible_job
from allotment.service.principal import Principal
from allotment.service.specs import Argument, Choices, Env, GpuCount, JobSpec
from allotment.service.views import AttachInfo, JobSummary, SessionView
from allotment.service.yamlinput import Document, from_data
from allotment.store.db import reading
from allotment.store.tables import RunRow


class SessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    budget: Name
    gpus: GpuCount = 1
    length: Duration | None = None
    """How long the session may hold its GPUs (default: the policy's default_slice, at most session_max_length)."""
    grace: Duration | None = None
    """SIGTERM → SIGKILL notice when it ends (default: the policy's default_grace, at most max_grace)."""
    command: Annotated[list[Argument], Field(min_length=1, max_length=MAX_ARGS)] | None = None
    """What the session runs while it is held (default: sleep for its length)."""
    name: Name | None = None
    gpu_types: Choices = ()
    clusters: Choices = ()
    env: Env = Field(default_factory=dict)


def session_spec(request: SessionRequest, policy: PolicyConfig) -> Document[JobSpec]:
    """The job spec of a session; the length the command sleeps is the one the submission will be given."""
    length = request.length if request.length is not None else policy.default_session_length
    data: dict[str, Any] = {
        "name": request.name or f"session-{request.budget}",
        "budget": request.budget,
        "command": request.command or ["sleep", str(length)],
        "env": dict(request.env),
        "kind": JobKind.SESSION.value,
        "resources": {"gpus": request.gpus, "gpu_types": list(request.gpu_types), "clusters": list(request.clusters)},
        "contract": {"slice": length},
        "requeue": False,
    }
    if request.grace is not None:
        data["grace"] = request.grace
    return from_data(JobSpec, data, "session request")


def request_session(
    ctx: Context, principal: Principal, request: SessionRequest, request_id: str | None = None
) -> SessionView:
    submitted = submit_job(ctx, principal, session_spec(request, ctx.policy), request_id)
    return get_session(ctx, principal, submitted.job.id)


def _attach(ctx: Context, job_id: str, placement: list[dict[str, Any]]) -> list[AttachInfo]:
    out: list[AttachInfo] = []
    for allocation in placement:
        node, gpus = str(allocation["node"]), [int(g) for g in allocation["gpus"]]
        env = {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus), "ALLOT_JOB_ID": job_id, "ALLOT_NODE": node}
        assignments = [f"{k}={v}" for k, v in env.items()]
        if ctx.executor == "local":
            command = ["env", *assignments, "bash", "-l"]
            hint = (
                f"the local executor runs sessions on the server's host (node {node} is a name there): run this there"
            )
        else:
            command = ["ssh", "-t", node, "env", *assignments, "bash", "-l"]
            hint = f"log in to {node} and work with the GPUs the session holds"
        out.append(AttachInfo(node=node, gpus=gpus, command=command, env=env, hint=hint))
    return out


def get_session(ctx: Context, principal: Principal, job_id: str) -> SessionView:
    with reading(ctx.sessions) as session:
        row = visible_job(session, principal, job_id)
        if row.kind != JobKind.SESSION.value:
            raise NotFound(f"no session {job_id!r} (it is a {row.kind} job)")
        run = session.scalars(
            select(RunRow).where(RunRow.job_id == job_id).order_by(RunRow.attempt.desc()).limit(1)
        ).first()
        job: JobSummary = summary(row)
    live = run is not None and run.ended_at is None
    return SessionView(
        job=job,
        ready=live and row.state == JobState.RUNNING,
        started_at=run.started_at if run is not None else None,
        ends_at=run.slice_end if live and run is not None else None,
        idle_since=run.idle_since if live and run is not None else None,
        attach=_attach(ctx, job_id, list(run.placement)) if live and run is not None else [],
    )


def release_session(ctx: Context, principal: Principal, job_id: str) -> JobSummary:
    return cancel_job(ctx, principal, job_id, kinds=(JobKind.SESSION.value,))
