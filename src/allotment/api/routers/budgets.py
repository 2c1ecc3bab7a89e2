"""/budgets: the tree, one budget in detail, members.

Owns: the HTTP shape of the budget reads. Must not: hold rules (service.budgets does).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.config.limits import MAX_DURATION
from allotment.service import budgets
from allotment.service.views import BudgetDetail, BudgetTree, MemberView

router = APIRouter(prefix="/budgets", tags=["budgets"], responses=ERROR_RESPONSES)


@router.get("", response_model=BudgetTree)
def tree(ctx: Ctx, caller: Caller, root: str | None = None) -> BudgetTree:
    """Every budget (or `root`'s subtree) with allocation, used and remaining credit this period."""
    return budgets.budget_tree(ctx, caller, root)


@router.get("/{name}", response_model=BudgetDetail)
def show(
    name: str,
    ctx: Ctx,
    caller: Caller,
    window: Annotated[int, Query(gt=0, le=MAX_DURATION)] = budgets.DEFAULT_BURN_WINDOW,
) -> BudgetDetail:
    """A budget with its burn rate over the trailing `window` seconds and projected exhaustion."""
    return budgets.show_budget(ctx, caller, name, window)


@router.get("/{name}/members", response_model=list[MemberView])
def members(name: str, ctx: Ctx, caller: Caller) -> list[MemberView]:
    return budgets.members(ctx, caller, name)
