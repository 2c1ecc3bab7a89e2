"""The budget-plan document: next period's allocations, limits, members and capacity windows, as an administrator
writes it (docs/api.md, "Budget plans").

Owns: the plan's shape and field validation, shared by the service that applies a plan (service/plans.py) and the
simulator that replays history under one (sim/whatif.py). Must not: read or change any state.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from allotment.config.fields import Credits, FreeText, Name, PositiveInt
from allotment.config.schema import Member, WindowConfig


def _period_id(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PlanMember = Member
"""A member as the configuration writes it (user, role)."""


class PlanBudget(_Model):
    name: Name
    parent: Name | None = None
    """Required for a new budget; for an existing one it must be its parent (budgets do not move)."""
    allocation: Credits
    max_gpus: PositiveInt | None = None
    members: tuple[PlanMember, ...] | None = None
    """When given, the budget's complete member list."""


PlanWindow = WindowConfig
"""A capacity window as the configuration writes it."""


class BudgetPlan(_Model):
    period: Annotated[str, BeforeValidator(_period_id), Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    """The id (start date) of the period the plan is for: the current one."""
    why: FreeText = ""
    budgets: tuple[PlanBudget, ...] = ()
    windows: tuple[PlanWindow, ...] | None = None
    """When given, the complete set of capacity windows of the budgets this plan lists."""
