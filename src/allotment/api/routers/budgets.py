"""/budgets: the tree, one budget in detail, members.

Owns: the HTTP shape of the budget reads. Must not: hold rules (service.budgets does).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.service import budgets
from allotment.service.errors import Invalid
from allotment.service.views import BudgetDetail, BudgetTree, MemberView

router = APIRouter(prefix="/budgets", tags=["budgets"], responses=ERROR_RESPONSES)


def one_rate_window(window: Annotated[str | None, Query(include_in_schema=False)] = None) -> None:
    """Refuse `?window=`: the run-out forecast has one rate window, the trailing 24 hours (decision 57), so a
    client asking for another learns that instead of silently getting a different number."""
    if window is not None:
        raise Invalid.of("query.window", "the run-out forecast has one rate window, the trailing 24 hours")


OneRateWindow = Depends(one_rate_window)


@router.get("", response_model=BudgetTree)
def tree(ctx: Ctx, caller: Caller, root: str | None = None) -> BudgetTree:
    """Every budget (or `root`'s subtree) with allocation, used and remaining credit this period."""
    return budgets.budget_tree(ctx, caller, root)


@router.get("/{name}", response_model=BudgetDetail, dependencies=[OneRateWindow])
def show(name: str, ctx: Ctx, caller: Caller) -> BudgetDetail:
    """A budget with its run-out forecast (the rate over the trailing 24 hours; it lasts the period, runs out before
    the period end, or is exhausted), members and capacity windows."""
    return budgets.show_budget(ctx, caller, name)


@router.get("/{name}/members", response_model=list[MemberView])
def members(name: str, ctx: Ctx, caller: Caller) -> list[MemberView]:
    return budgets.members(ctx, caller, name)
