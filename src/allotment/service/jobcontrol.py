"""Job control beyond one job at a time: cancelling every active job a filter names (scancel -u/-A/-t/-n).

Owns: the filter's rules (at least one of user, budget, states, name; states only active ones; a non-administrator
cancels only their own jobs, so their filter is narrowed to them and naming another user is refused), the dry run
that only reports, the one transaction that marks every matching job's cancellation, the audit record, and the
report of what was asked to cancel.

Must not: start, stop or place anything (the engine acts on the requests in its next cycle, as for one job), or hold
the one-job cancellation rules (service.jobs does).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from allotment.config.fields import FreeText, Name
from allotment.config.limits import MAX_CHOICES
from allotment.core.jobstate import ACTIVE_ORDERED
from allotment.service.context import Context
from allotment.service.errors import Forbidden, Invalid
from allotment.service.jobs import summary
from allotment.service.principal import Principal
from allotment.service.views import JobSummary, View
from allotment.store.db import reading
from allotment.store.jobcontrol import JobFilter, active_matching, request_cancel_all
from allotment.store.records import audit
from allotment.store.tables import JobRow

ACTIVE_NAMES: tuple[str, ...] = tuple(s.value for s in ACTIVE_ORDERED)


class CancelFilter(BaseModel):
    """Which active jobs to cancel: every given field must match; give at least one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: Name | None = None
    """Only this user's jobs (a non-administrator: themselves, the default)."""
    budget: Name | None = None
    states: list[Name] = Field(default_factory=list, max_length=MAX_CHOICES)
    """Only jobs in these states: pending, running, preempting (default: all three)."""
    name: FreeText | None = None
    """Only jobs with exactly this name."""
    dry_run: bool = False
    """Report what would be cancelled and change nothing."""


class CancelReport(View):
    """What a cancellation by filter asked: every matching active job (newly asked or asked before) and the count of
    requests this call added."""

    jobs: list[JobSummary]
    matched: int
    requested: int
    """Cancellation requests this call recorded (0 in a dry run; a job asked before is matched, not requested)."""
    dry_run: bool


def _scope(principal: Principal, where: CancelFilter) -> JobFilter:
    if not (where.user or where.budget or where.states or where.name):
        raise Invalid.of("", "name at least one of user, budget, states or name (cancelling every job is not a filter)")
    final = sorted(set(where.states) - set(ACTIVE_NAMES))
    if final:
        active = ", ".join(ACTIVE_NAMES)
        raise Invalid.of("states", f"{final[0]!r} is not an active state; only {active} jobs can be cancelled")
    user = where.user
    if not principal.admin:
        if user is not None and user != principal.user:
            raise Forbidden(f"{principal.user} may not cancel {user}'s jobs by filter: administrators only")
        user = principal.user
    return JobFilter(user=user, budget=where.budget, states=tuple(where.states), name=where.name)


def cancel_matching(ctx: Context, principal: Principal, where: CancelFilter) -> CancelReport:
    """Ask the engine to cancel every active job `where` names (one transaction); a dry run only reports them."""
    scope = _scope(principal, where)
    if where.dry_run:
        with reading(ctx.sessions) as session:
            rows = active_matching(session, scope)
            return _report(rows, 0, dry_run=True)
    with ctx.sessions.begin() as session:
        rows = active_matching(session, scope, lock=True)
        now = ctx.now()
        requested = request_cancel_all(session, rows, now)
        if requested:
            audit(
                session,
                at=now,
                actor=principal.user,
                action="jobs.cancel",
                target=_target(scope),
                detail={"matched": len(rows), "requested": requested},
            )
        report = _report(rows, requested, dry_run=False)
    if requested:
        ctx.notify()
    return report


def _report(rows: Sequence[JobRow], requested: int, *, dry_run: bool) -> CancelReport:
    jobs = [summary(r) for r in rows]
    return CancelReport(jobs=jobs, matched=len(jobs), requested=requested, dry_run=dry_run)


def _target(scope: JobFilter) -> str:
    parts = [f"{k}={v}" for k, v in (("user", scope.user), ("budget", scope.budget), ("name", scope.name)) if v]
    if scope.states:
        parts.append("states=" + ",".join(scope.states))
    return " ".join(parts)
