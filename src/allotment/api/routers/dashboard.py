"""/dashboard: the read models the web dashboard draws from (any client may use them): the overview, budgets with
their pace, a budget's burn-down and charges, the pending queue with reasons, and the fleet map.

Owns: the HTTP shape of those reads (query parameters and their bounds). Must not: hold rules (service.dashboard,
service.queueview and service.fleetmap do).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.api.routers.budgets import OneRateWindow
from allotment.service import charges as charge_lines
from allotment.service import dashboard, fleetmap, queueview
from allotment.service.dashboard_views import BudgetPaces, BurnDown, ChargePage, FleetMap, Overview, QueuePage
from allotment.service.jobs import MAX_PAGE

router = APIRouter(prefix="/dashboard", tags=["dashboard"], responses=ERROR_RESPONSES)


@router.get("/overview", response_model=Overview, dependencies=[OneRateWindow])
def overview(ctx: Ctx, caller: Caller) -> Overview:
    """Fleet utilisation per cluster, jobs per state, GPUs asked for by the queue, the budgets burning fastest."""
    return dashboard.overview(ctx, caller)


@router.get("/budgets", response_model=BudgetPaces, dependencies=[OneRateWindow])
def budgets(ctx: Ctx, caller: Caller) -> BudgetPaces:
    """Every budget with allocation, used, remaining, run-out forecast and pace against the period."""
    return dashboard.budget_paces(ctx, caller)


@router.get("/budgets/{name}/burndown", response_model=BurnDown, dependencies=[OneRateWindow])
def burndown(
    name: str,
    ctx: Ctx,
    caller: Caller,
    points: Annotated[int, Query(ge=1, le=dashboard.MAX_POINTS)] = 120,
) -> BurnDown:
    """The subtree's remaining credit over the current period, with its run-out forecast."""
    return dashboard.burn_down(ctx, caller, name, points)


@router.get("/budgets/{name}/charges", response_model=ChargePage)
def charges(
    name: str,
    ctx: Ctx,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=dashboard.MAX_CHARGES)] = 50,
    cursor: str | None = None,
) -> ChargePage:
    """Ledger entries of the budget's subtree, newest first (members, leads above, operators, administrators)."""
    return dashboard.charges(ctx, caller, name, limit=limit, cursor=cursor)


@router.get("/budgets/{name}/charge-lines", response_model=charge_lines.ChargeLinePage)
def budget_charge_lines(
    name: str,
    ctx: Ctx,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=charge_lines.MAX_SCAN, description="Ledger entries read")] = (
        charge_lines.DEFAULT_SCAN
    ),
    cursor: str | None = None,
) -> charge_lines.ChargeLinePage:
    """The subtree's ledger entries coalesced into lines (GPUs × time × rate × price = credits), newest first,
    from up to `limit` entries a page (members, leads above, operators, administrators)."""
    return charge_lines.budget_charge_lines(ctx, caller, name, limit=limit, cursor=cursor)


@router.get("/queue", response_model=QueuePage)
def queue(
    ctx: Ctx,
    caller: Caller,
    budget: str | None = None,
    user: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> QueuePage:
    """Pending jobs, oldest first, each with its blocker, estimated start and hints."""
    return queueview.pending_queue(ctx, caller, budget=budget, user=user, limit=limit, cursor=cursor)


@router.get("/fleet", response_model=FleetMap)
def fleet(ctx: Ctx, caller: Caller, cluster: str | None = None) -> FleetMap:
    """Clusters and their nodes: GPUs in use, state, drains and when draining nodes will be empty."""
    return fleetmap.fleet_map(ctx, caller, cluster)
