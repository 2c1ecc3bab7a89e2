"""Holding and releasing pending jobs (scontrol hold / uhold / release; Slurm's JobHeldUser and JobHeldAdmin).

Owns: who may hold and release what (a user hold: whoever may manage the job, i.e. its owner, a lead of its budget's
subtree or an administrator; an admin hold: administrators only, and only an administrator releases it, so a user
cannot release an admin hold), that only a pending job is held (a running job is refused with 409, as Slurm holds
only pending jobs: end it with cancel or put it back in the queue with requeue), that an admin hold is never
weakened by a user hold, that holding a held job or releasing a job that is not held changes nothing, the one
transaction that writes the hold, and its audit record.

Must not: keep a held job from the scheduler (changes.eligibility does, in every cycle's snapshot), or start, stop
or place anything (the engine is the single writer of scheduling state).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from allotment.changes.eligibility import HOLD_ADMIN, HOLD_USER
from allotment.core.jobstate import JobState
from allotment.service.context import Context
from allotment.service.errors import Conflict, Forbidden
from allotment.service.jobs import summary, visible_job
from allotment.service.principal import Principal, budget_parents
from allotment.service.views import JobSummary
from allotment.store.records import audit
from allotment.store.tables import JobRow


class HoldRequest(BaseModel):
    """Which hold to set: `user` (scontrol uhold) or `admin` (administrators only); omitted, Slurm's `scontrol hold`
    default: an administrator sets an admin hold, anyone else a user hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["user", "admin"] | None = None


def hold_job(ctx: Context, principal: Principal, job_id: str, request: HoldRequest | None = None) -> JobSummary:
    """Hold a pending job: the scheduler stops considering it until it is released."""
    kind = hold_kind(principal, request)
    with ctx.sessions.begin() as session:
        row = visible_job(session, principal, job_id)
        _may_manage(principal, row, "hold", session_parents=budget_parents(session))
        may_set(principal, kind, job_id)
        if row.state != JobState.PENDING.value:
            raise Conflict(
                f"job {job_id} is {row.state}: only a pending job can be held (cancel it, or requeue it to hold it"
                " in the queue)"
            )
        if row.cancel_requested_at is not None:
            raise Conflict(f"job {job_id} is being cancelled: it cannot be held")
        new = held_as(row.hold, kind)
        if row.hold != new:
            now = ctx.now()
            audit(session, at=now, actor=principal.user, action="jobs.hold", target=job_id,
                  detail={"hold": new, "was": row.hold})  # fmt: skip
            row.hold, row.updated_at = new, now
        result = summary(row)
    ctx.notify()
    return result


def release_job(ctx: Context, principal: Principal, job_id: str) -> JobSummary:
    """Release a held job: it is considered again from the next cycle on. An admin hold is released only by an
    administrator."""
    with ctx.sessions.begin() as session:
        row = visible_job(session, principal, job_id)
        _may_manage(principal, row, "release", session_parents=budget_parents(session))
        may_release(principal, row.hold, f"job {job_id}")
        if row.state != JobState.PENDING.value:  # a held job cancelled while held ends with its hold
            raise Conflict(f"job {job_id} is {row.state}: only a pending job is held or released")
        if row.hold is not None:
            now = ctx.now()
            audit(session, at=now, actor=principal.user, action="jobs.release", target=job_id,
                  detail={"was": row.hold})  # fmt: skip
            row.hold, row.updated_at = None, now
        result = summary(row)
    ctx.notify()
    return result


def hold_kind(principal: Principal, request: HoldRequest | None) -> str:
    """The hold asked for: the request's kind, or Slurm's default for the principal's role."""
    return (request.kind if request is not None else None) or (HOLD_ADMIN if principal.admin else HOLD_USER)


def may_set(principal: Principal, kind: str, target: str) -> None:
    """Forbidden unless the principal may set a hold of this kind (an admin hold: administrators only)."""
    if kind == HOLD_ADMIN and not principal.admin:
        raise Forbidden(f"{principal.user} may not set an admin hold on {target}: administrators only")


def held_as(current: str | None, kind: str) -> str:
    """The hold a job has after a hold of `kind` is asked on top of `current`: an admin hold is never weakened."""
    return HOLD_ADMIN if HOLD_ADMIN in (current, kind) else HOLD_USER


def may_release(principal: Principal, current: str | None, target: str) -> None:
    """Forbidden when the hold is an admin hold and the principal no administrator."""
    if current == HOLD_ADMIN and not principal.admin:
        raise Forbidden(
            f"{target} is held by an administrator (admin hold): {principal.user} may not release it;"
            " ask an administrator"
        )


def _may_manage(principal: Principal, row: JobRow, verb: str, *, session_parents: dict[str, str | None]) -> None:
    if not principal.may_manage_job(row.user, row.budget, session_parents):
        raise Forbidden(f"{principal.user} may not {verb} {row.id}: it is {row.user}'s job in {row.budget}")
