"""/reports: usage by budget, period and GPU type.

Owns: the HTTP shape of the reports. Must not: hold rules (service.reports does).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.service import reports
from allotment.service.views import UsageReport

router = APIRouter(prefix="/reports", tags=["reports"], responses=ERROR_RESPONSES)


@router.get("/usage", response_model=UsageReport)
def usage(
    ctx: Ctx,
    caller: Caller,
    period: Annotated[list[str] | None, Query(description="Period ids (YYYY-MM-DD); default the current")] = None,
    budget: str | None = None,
) -> UsageReport:
    return reports.usage(ctx, caller, periods=period or (), budget=budget)
