"""Requeueing a running job (Slurm's `scontrol requeue` and `requeuehold`): the request, not the act.

Owns: the RequeueRequest (`hold`: put it back held), who may requeue a job (as cancel: its owner, a lead of its
budget's subtree, an administrator), which jobs may be requeued (a running batch job, not being cancelled; a pending,
leaving or finished job and any session is 409), and the one transaction that records the request: the attempt it
is made of (`jobs.requeue_attempt`, so it never outlives the run it names), one more in `jobs.requeues`, the hold
when asked (the same default as `allot hold`: an administrator's is an admin hold), and an audit record.

Must not: stop, charge or place anything. The engine is the single writer of scheduling state: its next cycle turns
the request into a preemption with the job's grace and requeue True (core/cancellation.py), the run is charged to
its end like any other, and the job goes back to pending with the same id (changes/events.next_state).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, StrictBool

from allotment.changes.eligibility import HOLD_ADMIN, HOLD_USER
from allotment.core.jobstate import JobState
from allotment.core.model import JobKind
from allotment.service.context import Context
from allotment.service.errors import Conflict, Forbidden
from allotment.service.jobs import summary, visible_job
from allotment.service.principal import Principal, budget_parents
from allotment.service.views import JobSummary
from allotment.store.records import audit


class RequeueRequest(BaseModel):
    """`hold`: put the job back held (scontrol requeuehold), released with `allot release`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hold: StrictBool = False


def requeue_job(ctx: Context, principal: Principal, job_id: str, request: RequeueRequest | None = None) -> JobSummary:
    """Ask the engine to stop the job's run and put the job back in the queue, held when asked."""
    hold = request is not None and request.hold
    with ctx.sessions.begin() as session:
        row = visible_job(session, principal, job_id)
        if not principal.may_manage_job(row.user, row.budget, budget_parents(session)):
            raise Forbidden(f"{principal.user} may not requeue {job_id}: it is {row.user}'s job in {row.budget}")
        if row.kind == JobKind.SESSION.value:
            raise Conflict(f"{job_id} is a session: a session is not requeued (release it and ask for another)")
        if row.state != JobState.RUNNING.value:
            raise Conflict(f"job {job_id} is {row.state}: {_why_not(row.state)}")
        if row.cancel_requested_at is not None:
            raise Conflict(f"job {job_id} is being cancelled: it cannot be requeued")
        now = ctx.now()
        asked = row.requeue_attempt == row.attempt
        kind = HOLD_ADMIN if principal.admin else HOLD_USER
        held = HOLD_ADMIN if HOLD_ADMIN in (row.hold, kind) else HOLD_USER
        if not asked or (hold and row.hold != held):
            audit(session, at=now, actor=principal.user, action="jobs.requeue", target=job_id,
                  detail={"attempt": row.attempt, "hold": held if hold else None})  # fmt: skip
        if not asked:
            row.requeue_attempt, row.requeues = row.attempt, row.requeues + 1
        if hold:
            row.hold = held
        row.updated_at = now
        result = summary(row)
    ctx.notify()
    return result


def _why_not(state: str) -> str:
    if state == JobState.PENDING.value:
        return "only a running job is requeued; a pending one is in the queue already"
    if state == JobState.PREEMPTING.value:
        return "it is already being stopped (a preempted job that may be requeued goes back to the queue by itself)"
    return "a finished job is not requeued: submit it again"
