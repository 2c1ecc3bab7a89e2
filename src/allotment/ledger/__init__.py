"""The ledger's accounting rules: pure arithmetic on credit movements.

Owns: ledger entry records and their sign convention, idempotency keys, charge accrual for runs, refund
rules, balance roll-ups up the budget tree, the run-out forecast, budgeting periods and
rollover, and decayed fair-share usage.

Must not: touch a database, a clock, files or the network. It imports only allotment.core and the standard
library; allotment.store persists what these rules produce.
"""

from __future__ import annotations

from allotment.ledger.charges import Meter, accrue, price_for, refund, reprice, run_rate
from allotment.ledger.entries import (
    INFRASTRUCTURE,
    Entry,
    EntryKind,
    adjust_key,
    alloc_key,
    carry_key,
    charge_key,
    infra_key,
    refund_key,
    run_id,
)
from allotment.ledger.forecast import RATE_WINDOW, Forecast, Outcome, forecast
from allotment.ledger.periods import Cadence, Period, PeriodSpec, Rollover, opening_entries, period_at
from allotment.ledger.tree import leaves, overcommitted, rollup
from allotment.ledger.usage import decayed, usage_after

__all__ = [
    "INFRASTRUCTURE",
    "RATE_WINDOW",
    "Cadence",
    "Entry",
    "EntryKind",
    "Forecast",
    "Meter",
    "Outcome",
    "Period",
    "PeriodSpec",
    "Rollover",
    "accrue",
    "adjust_key",
    "alloc_key",
    "carry_key",
    "charge_key",
    "decayed",
    "forecast",
    "infra_key",
    "leaves",
    "opening_entries",
    "overcommitted",
    "period_at",
    "price_for",
    "refund",
    "refund_key",
    "reprice",
    "rollup",
    "run_id",
    "run_rate",
    "usage_after",
]
