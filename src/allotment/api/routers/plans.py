"""/plans: diff a budget plan against the current state, and apply it atomically.

Owns: the HTTP shape of the budgeting process; a caller who may change no budget is refused (403) before the plan
is parsed. Must not: hold rules (service.plans does).
"""

from __future__ import annotations

from fastapi import APIRouter

from allotment.api.auth import Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.api.limits import Planner
from allotment.api.schemas import PlanRequest
from allotment.service import plans
from allotment.service.errors import BadRequest
from allotment.service.views import PlanApplied, PlanDiff
from allotment.service.yamlinput import Document

router = APIRouter(prefix="/plans", tags=["plans"], responses=ERROR_RESPONSES)


def _document(body: PlanRequest) -> Document[plans.BudgetPlan]:
    if (body.yaml is None) == (body.plan is None):
        raise BadRequest("give the plan as either `yaml` (text) or `plan` (an object)")
    return plans.parse_plan(body.yaml) if body.yaml is not None else plans.plan_from_data(body.plan)


@router.post("/diff", response_model=PlanDiff)
def diff(body: PlanRequest, ctx: Ctx, caller: Planner) -> PlanDiff:
    """What the plan would change (nothing is written)."""
    return plans.diff_plan(ctx, caller, _document(body))


@router.post("/apply", response_model=PlanApplied)
def apply(body: PlanRequest, ctx: Ctx, caller: Planner) -> PlanApplied:
    """Apply the whole plan in one transaction, recorded in the audit log, or nothing of it."""
    return plans.apply_plan(ctx, caller, _document(body), body.why)
