"""The dashboard's budget and organisation reads: the overview (fleet utilisation, queue depth, budgets burning
fastest), every budget's pace against the period, a budget's burn-down series with its run-out forecast, and a
budget's charges page by page.

Owns: aggregate queries sized for a large deployment (tens of thousands of jobs, hundreds of nodes): counts and sums
are computed by the database (GROUP BY), never by loading whole tables; the burn-down is bucketed in SQL; charges are
paged by ledger id. Budget figures (allocation, used, remaining) come from service.budgets and run-out forecasts from
service.forecasts, so the dashboard shows the same numbers as the API and the CLI.

Rights: budgets, the overview and burn-down are visible to every user (fair share depends on everyone's standing);
a budget's charges are visible to its members, leads above it, operators and administrators.

Must not: write anything, or recompute rules that live elsewhere (standings, burn, rights).
"""

from __future__ import annotations

from sqlalchemy import func, select

from allotment.core.jobstate import JobState
from allotment.core.model import NodeState
from allotment.ledger import RATE_WINDOW, EntryKind
from allotment.ledger.tree import ancestors
from allotment.service.budgets import budget_tree
from allotment.service.context import Context
from allotment.service.dashboard_views import (
    BudgetPace,
    BudgetPaces,
    BurnDown,
    BurnPoint,
    ChargePage,
    ChargeRow,
    ClusterUse,
    Overview,
    PeriodView,
)
from allotment.service.errors import BadRequest, Forbidden, Invalid, NotFound
from allotment.service.forecasts import forecasts
from allotment.service.principal import Principal, budget_parents
from allotment.store.db import reading
from allotment.store.tables import JobRow, LedgerEntryRow, NodeRow, RunRow

SPENDING = (EntryKind.CHARGE.value, EntryKind.REFUND.value)
FASTEST = 5
MAX_POINTS = 400
MAX_CHARGES = 500


def _period(ctx: Context) -> PeriodView:
    p = ctx.period()
    return PeriodView(id=p.id, start=p.start, end=p.end)


def budget_paces(ctx: Context, principal: Principal) -> BudgetPaces:
    """Every budget with its figures, run-out forecast and pace against the period."""
    now, period = ctx.now(), _period(ctx)
    tree = budget_tree(ctx, principal)
    with reading(ctx.sessions) as session:
        ahead = forecasts(session, tree.budgets, now, period.end)
    elapsed = min(1.0, max(0.0, (now - period.start) / max(1, period.end - period.start)))
    out = []
    for node in tree.budgets:
        funds = node.used_micro + node.remaining_micro
        used = node.used_micro / funds if funds > 0 else (1.0 if node.used_micro > 0 else 0.0)
        out.append(
            BudgetPace(
                **node.model_dump(),
                forecast=ahead[node.name],
                used_fraction=round(used, 6),
                elapsed_fraction=round(elapsed, 6),
                pace=round(used / elapsed, 4) if elapsed > 0 else None,
            )
        )
    return BudgetPaces(now=now, period=period, window=RATE_WINDOW, budgets=out)


def overview(ctx: Context, principal: Principal) -> Overview:
    """The organisation at a glance: GPUs per cluster (in use, unavailable), jobs per state, the GPUs the queue asks
    for, and the leaf budgets spending fastest over the forecast's rate window."""
    paces = budget_paces(ctx, principal)
    with reading(ctx.sessions) as session:
        node_cluster: dict[str, str] = {}
        clusters: dict[str, dict[str, int]] = {}
        for name, cluster, gpus, state in session.execute(
            select(NodeRow.name, NodeRow.cluster, NodeRow.gpus, NodeRow.state)
        ):
            node_cluster[name] = cluster
            c = clusters.setdefault(cluster, {"nodes": 0, "gpus": 0, "used": 0, "unavailable": 0})
            c["nodes"] += 1
            c["gpus"] += gpus
            if state != NodeState.READY.value:
                c["unavailable"] += gpus
        for (placement,) in session.execute(select(RunRow.placement).where(RunRow.ended_at.is_(None))):
            for allocation in placement:
                home = node_cluster.get(str(allocation["node"]))
                if home is not None:
                    clusters[home]["used"] += len(allocation["gpus"])
        by_state = {
            state: int(n) for state, n in session.execute(select(JobRow.state, func.count()).group_by(JobRow.state))
        }
        pending_gpus = session.scalar(
            select(func.coalesce(func.sum(JobRow.gpus * JobRow.replicas), 0)).where(JobRow.state == JobState.PENDING)
        )
    uses = [
        ClusterUse(name=n, nodes=c["nodes"], gpus=c["gpus"], used_gpus=c["used"], unavailable_gpus=c["unavailable"])
        for n, c in sorted(clusters.items())
    ]
    leaves = [b for b in paces.budgets if b.leaf and b.forecast.spent_micro > 0]
    fastest = sorted(leaves, key=lambda b: (-b.forecast.per_hour_micro, b.name))[:FASTEST]
    return Overview(
        now=paces.now,
        period=paces.period,
        clusters=uses,
        gpus=sum(c.gpus for c in uses),
        used_gpus=sum(c.used_gpus for c in uses),
        unavailable_gpus=sum(c.unavailable_gpus for c in uses),
        jobs_by_state=by_state,
        pending_gpus=int(pending_gpus or 0),
        fastest=fastest,
    )


def _subtree(parents: dict[str, str | None], budget: str) -> list[str]:
    return [name for name in parents if name == budget or budget in ancestors(name, parents)]


def burn_down(ctx: Context, principal: Principal, budget: str, points: int = 120) -> BurnDown:
    """The subtree's remaining credit over the current period: at its start, at `points` evenly spaced bucket
    boundaries up to now, and now; with its run-out forecast."""
    if not 1 <= points <= MAX_POINTS:
        raise Invalid.of("points", f"must be between 1 and {MAX_POINTS}")
    paces = budget_paces(ctx, principal)
    node = next((b for b in paces.budgets if b.name == budget), None)
    if node is None:
        raise NotFound(f"no budget {budget!r}")
    now, period = paces.now, paces.period
    span = max(1, min(now, period.end) - period.start)
    bucket = max(60, -(-span // points))
    with reading(ctx.sessions) as session:
        members = _subtree(budget_parents(session), budget)
        index = (LedgerEntryRow.at - period.start) // bucket
        per_bucket = {
            int(i): -int(total or 0)
            for i, total in session.execute(
                select(index, func.sum(LedgerEntryRow.amount_micro))
                .where(
                    LedgerEntryRow.budget.in_(members),
                    LedgerEntryRow.kind.in_(SPENDING),
                    LedgerEntryRow.period_id == period.id,
                    LedgerEntryRow.at <= now,
                )
                .group_by(index)
            )
        }
    # Remaining at a boundary t is what remains now plus everything spent after t; a bucket i covers
    # [start + i·bucket, start + (i+1)·bucket), so the spending after boundary k is that of buckets ≥ k.
    after = sum(per_bucket.values())
    series = [BurnPoint(at=period.start, remaining_micro=node.remaining_micro + after)]
    boundary = 1
    while period.start + boundary * bucket < now:
        after -= per_bucket.get(boundary - 1, 0)
        series.append(BurnPoint(at=period.start + boundary * bucket, remaining_micro=node.remaining_micro + after))
        boundary += 1
    if now > period.start:
        series.append(BurnPoint(at=now, remaining_micro=node.remaining_micro))
    return BurnDown(
        budget=budget,
        now=now,
        period=period,
        funds_micro=node.used_micro + node.remaining_micro,
        remaining_micro=node.remaining_micro,
        bucket=bucket,
        points=series,
        forecast=node.forecast,
    )


def charges(
    ctx: Context, principal: Principal, budget: str, *, limit: int = 50, cursor: str | None = None
) -> ChargePage:
    """The ledger entries of `budget`'s subtree, newest first; `cursor` continues the listing."""
    if not 1 <= limit <= MAX_CHARGES:
        raise Invalid.of("limit", f"must be between 1 and {MAX_CHARGES}")
    before: int | None = None
    if cursor:
        if not cursor.isdigit():
            raise BadRequest(f"cursor {cursor!r} is not one this server handed out")
        before = int(cursor)
    with reading(ctx.sessions) as session:
        parents = budget_parents(session)
        if budget not in parents:
            raise NotFound(f"no budget {budget!r}")
        if not principal.may_view_budget_jobs(budget, parents):
            raise Forbidden(f"{principal.user} may not see the charges of {budget}: members, leads and operators only")
        stmt = (
            select(LedgerEntryRow)
            .where(LedgerEntryRow.budget.in_(_subtree(parents, budget)))
            .order_by(LedgerEntryRow.id.desc())
            .limit(limit + 1)
        )
        if before is not None:
            stmt = stmt.where(LedgerEntryRow.id < before)
        rows = list(session.scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return ChargePage(
        items=[
            ChargeRow(
                id=r.id,
                at=r.at,
                budget=r.budget,
                kind=r.kind,
                amount_micro=r.amount_micro,
                job_id=r.job_id,
                run_id=r.run_id,
                memo=r.memo,
            )
            for r in rows
        ],
        next_cursor=str(rows[-1].id) if more and rows else None,
    )
