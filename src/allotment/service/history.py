"""The history of finished jobs (`sacct`): who ran what, when, for how long, on how many GPU-hours, at what cost and
with what exit code, over a time range, page by page.

Owns: one paged query of finished jobs (completed, failed, cancelled, lost) whose end — the time they reached their
final state — lies in [since, until), newest end first, filtered by user, budget and state and limited to the jobs
the caller may see (their own, and their budgets' as `GET /jobs/{id}` allows); and each job's totals from its runs
(elapsed time, GPU-seconds, exit code of the last run) and the ledger (net credits charged: charges less refunds).

Must not: write anything, or price anything itself (the ledger holds what was charged).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, func, or_, select

from allotment.ledger import EntryKind
from allotment.service import cursors
from allotment.service.context import Context
from allotment.service.errors import Invalid
from allotment.service.jobs import MAX_PAGE
from allotment.service.principal import Principal, budget_parents
from allotment.service.views import HistoryEntry, HistoryPage
from allotment.store.db import reading
from allotment.store.records import FINAL_STATES
from allotment.store.tables import JobRow, LedgerEntryRow, RunRow

DAY = 86400
SPENT = (EntryKind.CHARGE.value, EntryKind.REFUND.value)


def job_history(
    ctx: Context,
    principal: Principal,
    *,
    since: int | None = None,
    until: int | None = None,
    user: str | None = None,
    budget: str | None = None,
    states: Sequence[str] = (),
    limit: int = 100,
    cursor: str | None = None,
) -> HistoryPage:
    """Finished jobs that ended in [since, until) (default: the last day), newest end first."""
    now = ctx.now()
    until = now if until is None else until
    since = until - DAY if since is None else since
    if since >= until:
        raise Invalid.of("since", f"must be before until ({until}); got {since}")
    unknown = sorted(set(states) - FINAL_STATES)
    if unknown:
        finals = ", ".join(sorted(FINAL_STATES))
        raise Invalid.of("state", f"{unknown[0]!r} is not a finished state (history holds {finals})")
    if not 1 <= limit <= MAX_PAGE:
        raise Invalid.of("limit", f"must be between 1 and {MAX_PAGE}")
    stmt = (
        select(JobRow)
        .where(JobRow.state.in_(sorted(set(states) or FINAL_STATES)))
        .where(JobRow.updated_at >= since, JobRow.updated_at < until)
        .order_by(JobRow.updated_at.desc(), JobRow.id.desc())
        .limit(limit + 1)
    )
    if user is not None:
        stmt = stmt.where(JobRow.user == user)
    if budget is not None:
        stmt = stmt.where(JobRow.budget == budget)
    if cursor:
        (at,), job_id = cursors.decode(cursor, "h", 1)
        stmt = stmt.where(or_(JobRow.updated_at < at, and_(JobRow.updated_at == at, JobRow.id < job_id)))
    with reading(ctx.sessions) as session:
        parents = budget_parents(session)
        visible = sorted(b for b in parents if principal.may_view_budget_jobs(b, parents))
        stmt = stmt.where(or_(JobRow.user == principal.user, JobRow.budget.in_(visible)))
        rows = list(session.scalars(stmt))
        more = len(rows) > limit
        rows = rows[:limit]
        ids = [r.id for r in rows]
        runs: dict[str, list[RunRow]] = {}
        for run in session.scalars(select(RunRow).where(RunRow.job_id.in_(ids)).order_by(RunRow.attempt)):
            runs.setdefault(run.job_id, []).append(run)
        run_ids = [run.id for job_runs in runs.values() for run in job_runs]
        charged: dict[tuple[str, str], int] = {}
        for owner, entry_budget, amount in session.execute(
            select(LedgerEntryRow.job_id, LedgerEntryRow.budget, func.sum(LedgerEntryRow.amount_micro))
            .where(LedgerEntryRow.run_id.in_(run_ids), LedgerEntryRow.kind.in_(SPENT))
            .group_by(LedgerEntryRow.job_id, LedgerEntryRow.budget)
        ):
            if owner is not None:
                charged[(owner, entry_budget)] = -int(amount or 0)
    items = [_entry(row, runs.get(row.id, []), charged.get((row.id, row.budget), 0)) for row in rows]
    return HistoryPage(
        since=since,
        until=until,
        items=items,
        next_cursor=cursors.encode("h", rows[-1].updated_at, job_id=rows[-1].id) if more and rows else None,
    )


def _entry(row: JobRow, runs: list[RunRow], charged: int) -> HistoryEntry:
    elapsed = gpu_seconds = 0
    for run in runs:
        if run.ended_at is None:
            continue
        seconds = max(0, run.ended_at - run.started_at)
        elapsed += seconds
        gpu_seconds += seconds * sum(len(p["gpus"]) for p in run.placement)
    last = runs[-1] if runs else None
    return HistoryEntry(
        id=row.id,
        name=row.name,
        user=row.user,
        budget=row.budget,
        kind=row.kind,
        contract=row.contract,
        gpus=row.gpus,
        replicas=row.replicas,
        state=row.state,
        state_reason=row.state_reason,
        submitted_at=row.submitted_at,
        started_at=runs[0].started_at if runs else None,
        ended_at=row.updated_at,
        attempts=len(runs),
        elapsed=elapsed,
        gpu_seconds=gpu_seconds,
        charged_micro=charged,
        exit_code=last.exit_code if last is not None else None,
    )
