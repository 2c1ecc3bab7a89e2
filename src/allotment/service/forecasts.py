"""The run-out forecast of budgets as the views show it: the subtree's spending over the one rate window, read from
the ledger, and ledger.forecast's rule applied to each budget's remaining credit and the period's end.

Owns: the one query of spending in the rate window (summed per budget by the database, rolled up the tree) and the
ForecastView every view returns (GET /budgets/{name}, /dashboard/overview, /dashboard/budgets, the burn-down).

Must not: hold the forecast rule (ledger/forecast.py does) or offer another window (decision 57).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from allotment.core.model import Micro, Seconds
from allotment.ledger import RATE_WINDOW, EntryKind, Forecast, forecast, rollup
from allotment.service.views import BudgetNode, ForecastView
from allotment.store.tables import LedgerEntryRow

SPENDING = (EntryKind.CHARGE.value, EntryKind.REFUND.value)


def spent_in_window(session: Session, now: Seconds) -> dict[str, Micro]:
    """Net spending per budget (its own entries, positive for charges) in the rate window (now − 24 h, now]."""
    rows = session.execute(
        select(LedgerEntryRow.budget, func.sum(LedgerEntryRow.amount_micro))
        .where(LedgerEntryRow.kind.in_(SPENDING), LedgerEntryRow.at > now - RATE_WINDOW, LedgerEntryRow.at <= now)
        .group_by(LedgerEntryRow.budget)
    ).all()
    return {budget: -int(total or 0) for budget, total in rows}


def view(f: Forecast) -> ForecastView:
    return ForecastView(
        window=f.window,
        spent_micro=f.spent,
        per_hour_micro=f.per_hour,
        outcome=f.outcome.value,
        runs_out_at=f.runs_out_at,
        period_end=f.period_end,
        left_at_end_micro=f.left_at_end,
    )


def forecasts(
    session: Session, nodes: Iterable[BudgetNode], now: Seconds, period_end: Seconds
) -> dict[str, ForecastView]:
    """Each budget's forecast: its subtree's spending in the rate window against its remaining credit."""
    items = list(nodes)
    spent = rollup(spent_in_window(session, now), {n.name: n.parent for n in items})
    return {n.name: view(forecast(n.remaining_micro, spent.get(n.name, 0), now, period_end)) for n in items}
