"""Job arrays as a whole: the array's view, and cancel, hold and release of every task it has not finished.

Owns: finding an array's tasks for a principal (NotFound when there is none; Forbidden as for one job's detail), the
view that counts its tasks per state with their indices, and the three actions on the array (scancel 123, scontrol
hold / release 123): cancel asks for the cancellation of every active task, hold holds every pending task not being
cancelled, release releases every held one, each in one transaction with one audit record. Who may do which is the
one-job rule (service.jobs and service.holds: the owner, a lead of the budget's subtree or an administrator; an
admin hold set and released by administrators only): every task of an array has the same owner and budget. A task
alone is acted on through its own id, like any job.

Must not: create arrays (service.jobs submits them, in one transaction with every task) or start, stop or place
anything (the engine acts on the requests; the `%N` rule is changes.eligibility's).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from allotment.config.arrays import ArrayRange, compact, is_array_id
from allotment.core.jobstate import ACTIVE, JobState
from allotment.service.context import Context
from allotment.service.errors import Forbidden, NotFound
from allotment.service.holds import HoldRequest, held_as, hold_kind, may_release, may_set
from allotment.service.principal import Principal, budget_parents
from allotment.service.views import ArrayControl, ArrayView
from allotment.store.db import reading
from allotment.store.jobcontrol import array_tasks, request_cancel_all
from allotment.store.records import audit
from allotment.store.tables import JobRow

HELD = "held"
PENDING = JobState.PENDING.value
ACTIVE_NAMES = frozenset(s.value for s in ACTIVE)


def _tasks(session: Session, principal: Principal, array_id: str, *, lock: bool = False) -> list[JobRow]:
    rows = array_tasks(session, array_id, lock=lock) if is_array_id(array_id) else []
    if not rows:
        raise NotFound(f"no job array {array_id!r}")
    first = rows[0]
    if first.user != principal.user and not principal.may_view_budget_jobs(first.budget, budget_parents(session)):
        raise Forbidden(f"{principal.user} may not see array {array_id}: it belongs to budget {first.budget}")
    return rows


def _may_manage(session: Session, principal: Principal, rows: Sequence[JobRow], verb: str) -> None:
    first = rows[0]
    if not principal.may_manage_job(first.user, first.budget, budget_parents(session)):
        raise Forbidden(
            f"{principal.user} may not {verb} array {first.array_id}: it is {first.user}'s in {first.budget}"
        )


def _view(rows: Sequence[JobRow]) -> ArrayView:
    first = rows[0]
    by_state: dict[str, list[int]] = {}
    for row in rows:
        index = row.array_index if row.array_index is not None else 0
        by_state.setdefault(row.state, []).append(index)
        if row.state == PENDING and row.hold is not None:
            by_state.setdefault(HELD, []).append(index)
    order = [*(s.value for s in JobState), HELD]
    indices = [r.array_index for r in rows if r.array_index is not None]
    return ArrayView(
        id=first.array_id or "",
        name=first.name,
        budget=first.budget,
        user=first.user,
        expression=ArrayRange(tuple(indices), first.array_limit).expression,
        tasks=len(rows),
        limit=first.array_limit,
        counts={state: len(by_state[state]) for state in order if state in by_state},
        indices={state: compact(by_state[state]) for state in order if state in by_state},
    )


def get_array(ctx: Context, principal: Principal, array_id: str) -> ArrayView:
    """The array with its tasks counted per state (who may see one task's detail may see the array)."""
    with reading(ctx.sessions) as session:
        return _view(_tasks(session, principal, array_id))


def cancel_array(ctx: Context, principal: Principal, array_id: str) -> ArrayControl:
    """Ask the engine to cancel every active task of the array (scancel ARRAY): pending ones never start, running
    ones get SIGTERM and their grace, as for one job."""
    with ctx.sessions.begin() as session:
        rows = _tasks(session, principal, array_id, lock=True)
        _may_manage(session, principal, rows, "cancel")
        now = ctx.now()
        changed = request_cancel_all(session, [r for r in rows if r.state in ACTIVE_NAMES], now)
        if changed:
            audit(session, at=now, actor=principal.user, action="arrays.cancel", target=array_id,
                  detail={"requested": changed})  # fmt: skip
        result = ArrayControl(array=_view(rows), action="cancel", changed=changed)
    if changed:
        ctx.notify()
    return result


def hold_array(ctx: Context, principal: Principal, array_id: str, request: HoldRequest | None = None) -> ArrayControl:
    """Hold every pending task of the array not being cancelled (scontrol hold ARRAY); tasks that run go on (hold a
    single job to be told it runs). The kind of hold is the one-job rule's (service.holds)."""
    kind = hold_kind(principal, request)
    with ctx.sessions.begin() as session:
        rows = _tasks(session, principal, array_id, lock=True)
        _may_manage(session, principal, rows, "hold")
        may_set(principal, kind, f"array {array_id}")
        now, changed = ctx.now(), 0
        for row in rows:
            if row.state == PENDING and row.cancel_requested_at is None and row.hold != held_as(row.hold, kind):
                row.hold, row.updated_at = held_as(row.hold, kind), now
                changed += 1
        if changed:
            audit(session, at=now, actor=principal.user, action="arrays.hold", target=array_id,
                  detail={"hold": kind, "held": changed})  # fmt: skip
        result = ArrayControl(array=_view(rows), action="hold", changed=changed)
    if changed:
        ctx.notify()
    return result


def release_array(ctx: Context, principal: Principal, array_id: str) -> ArrayControl:
    """Release every held task of the array (scontrol release ARRAY); when any is under an admin hold, only an
    administrator may (403, and nothing is released)."""
    with ctx.sessions.begin() as session:
        rows = _tasks(session, principal, array_id, lock=True)
        _may_manage(session, principal, rows, "release")
        held = [r for r in rows if r.state == PENDING and r.hold is not None]
        for row in held:
            may_release(principal, row.hold, f"task {row.id} of array {array_id}")
        now = ctx.now()
        for row in held:
            row.hold, row.updated_at = None, now
        if held:
            audit(session, at=now, actor=principal.user, action="arrays.release", target=array_id,
                  detail={"released": len(held)})  # fmt: skip
        result = ArrayControl(array=_view(rows), action="release", changed=len(held))
    if held:
        ctx.notify()
    return result
