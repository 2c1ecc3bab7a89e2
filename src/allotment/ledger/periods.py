"""Budgeting periods and rollover.

Owns: the calendar of periods (weekly, monthly or quarterly from an anchor instant, in UTC), the period
that holds an instant, and the entries that open a period: each leaf budget's allocation and, only where
configured, the previous period's closing balance carried forward.

Must not: read a clock or a database. Period ids are the UTC start date (YYYY-MM-DD), unique because a
period is at least a week long.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from allotment.core.model import Budget, Micro, Seconds
from allotment.ledger.entries import Entry, EntryKind, alloc_key, carry_key
from allotment.ledger.tree import leaves

WEEK: Seconds = 7 * 24 * 3600


class Cadence(StrEnum):
    WEEKLY = "weekly"
    MONTHLY = "monthly"
    QUARTERLY = "quarterly"


@dataclass(frozen=True, slots=True)
class PeriodSpec:
    cadence: Cadence
    anchor: Seconds
    """The start of one period (any one); all others follow from it. Monthly and quarterly periods start
    on the anchor's day of the month and time of day (clamped to the month's last day)."""


@dataclass(frozen=True, slots=True)
class Period:
    id: str
    start: Seconds
    end: Seconds

    def contains(self, t: Seconds) -> bool:
        return self.start <= t < self.end


@dataclass(frozen=True, slots=True)
class Rollover:
    """What a new period inherits from the one before. Allocations always renew; by default nothing
    carries."""

    carry_credit: bool = False
    """Unspent credit (a positive closing balance) opens the next period on top of its allocation."""
    carry_debt: bool = False
    """An overdraft (a negative closing balance, only possible through opportunistic work) reduces the
    next one."""


def _months(spec: PeriodSpec) -> int:
    return 3 if spec.cadence is Cadence.QUARTERLY else 1


def _add_months(anchor: datetime, months: int) -> datetime:
    total = anchor.year * 12 + (anchor.month - 1) + months
    year, month = divmod(total, 12)
    day = min(anchor.day, calendar.monthrange(year, month + 1)[1])
    return anchor.replace(year=year, month=month + 1, day=day)


def period_start(spec: PeriodSpec, index: int) -> Seconds:
    """Start of the period `index` periods after the anchor's (negative: before it)."""
    if spec.cadence is Cadence.WEEKLY:
        return spec.anchor + index * WEEK
    anchor = datetime.fromtimestamp(spec.anchor, UTC)
    return int(_add_months(anchor, index * _months(spec)).timestamp())


def period_index(spec: PeriodSpec, t: Seconds) -> int:
    """The index of the period holding instant `t`."""
    if spec.cadence is Cadence.WEEKLY:
        return (t - spec.anchor) // WEEK
    anchor = datetime.fromtimestamp(spec.anchor, UTC)
    when = datetime.fromtimestamp(t, UTC)
    index = ((when.year - anchor.year) * 12 + when.month - anchor.month) // _months(spec)
    while period_start(spec, index) > t:
        index -= 1
    while period_start(spec, index + 1) <= t:
        index += 1
    return index


def period_id(start: Seconds) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=start)).strftime("%Y-%m-%d")


def nth_period(spec: PeriodSpec, index: int) -> Period:
    start = period_start(spec, index)
    return Period(period_id(start), start, period_start(spec, index + 1))


def period_at(spec: PeriodSpec, t: Seconds) -> Period:
    """The period holding instant `t`."""
    return nth_period(spec, period_index(spec, t))


def next_period(spec: PeriodSpec, period: Period) -> Period:
    return period_at(spec, period.end)


def opening_entries(
    period: Period,
    allocations: Mapping[str, Micro],
    closing: Mapping[str, Micro],
    rollover: Rollover,
) -> list[Entry]:
    """The entries that open `period`: an allocation for each leaf budget in `allocations` and, where the
    rollover allows, a carry-over of its closing balance in `closing` (the previous period's balances).
    Keys are per budget and period, so opening a period twice posts once. Zero amounts are not posted."""
    entries: list[Entry] = []
    for budget in sorted(allocations):
        amount = allocations[budget]
        if amount < 0:
            raise ValueError(f"budget {budget}: negative allocation {amount}")
        if amount > 0:
            entries.append(
                Entry(
                    budget,
                    EntryKind.ALLOCATION,
                    amount,
                    period.start,
                    alloc_key(budget, period.id),
                    period.id,
                )
            )
    for budget in sorted(closing):
        balance = closing[budget]
        if (balance > 0 and rollover.carry_credit) or (balance < 0 and rollover.carry_debt):
            entries.append(
                Entry(
                    budget,
                    EntryKind.CARRYOVER,
                    balance,
                    period.start,
                    carry_key(budget, period.id),
                    period.id,
                    memo="closing balance of the previous period",
                )
            )
    return entries


def period_opening(
    period: Period, tree: Iterable[Budget], closing: Mapping[str, Micro], rollover: Rollover
) -> list[Entry]:
    """The entries that open `period` for a budget tree: each leaf's current allocation (leaves pay; inner budgets
    only split), with the carry-overs of `closing` (opening_entries)."""
    budgets = list(tree)
    payers = leaves(budgets)
    return opening_entries(period, {b.name: b.allocation for b in budgets if b.name in payers}, closing, rollover)
