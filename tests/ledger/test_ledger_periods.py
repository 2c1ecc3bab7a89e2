"""Period arithmetic (weekly, monthly, quarterly from an anchor) and the entries that open a period."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allotment.ledger import Cadence, EntryKind, PeriodSpec, Rollover, opening_entries, period_at
from allotment.ledger.periods import WEEK, next_period, nth_period, period_index

from .conftest import T0


def ts(year: int, month: int, day: int, hour: int = 0) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp())


def test_weekly_periods() -> None:
    spec = PeriodSpec(Cadence.WEEKLY, T0)
    p = period_at(spec, T0 + WEEK + 5)
    assert (p.id, p.start, p.end) == ("2026-01-08", T0 + WEEK, T0 + 2 * WEEK)
    assert period_at(spec, T0 - 1).end == T0
    assert period_at(spec, T0 + WEEK).start == T0 + WEEK  # a boundary belongs to the period it starts


def test_monthly_periods_clamp_to_the_end_of_short_months() -> None:
    spec = PeriodSpec(Cadence.MONTHLY, ts(2026, 1, 31, 6))
    feb = period_at(spec, ts(2026, 3, 1))
    assert (feb.start, feb.end) == (ts(2026, 2, 28, 6), ts(2026, 3, 31, 6))
    assert feb.id == "2026-02-28"
    assert period_at(spec, ts(2028, 2, 29, 12)).start == ts(2028, 2, 29, 6)  # leap year
    assert period_at(spec, ts(2025, 12, 31, 5)).start == ts(2025, 11, 30, 6)


def test_quarterly_periods() -> None:
    spec = PeriodSpec(Cadence.QUARTERLY, ts(2026, 1, 1))
    q = period_at(spec, ts(2026, 5, 15))
    assert (q.id, q.end) == ("2026-04-01", ts(2026, 7, 1))
    assert next_period(spec, q).id == "2026-07-01"
    assert period_at(spec, ts(2025, 12, 31)).id == "2025-10-01"


@given(
    cadence=st.sampled_from(list(Cadence)),
    anchor=st.integers(min_value=0, max_value=4_000_000_000),
    t=st.integers(min_value=0, max_value=4_000_000_000),
)
def test_every_instant_lies_in_exactly_one_period(cadence: Cadence, anchor: int, t: int) -> None:
    spec = PeriodSpec(cadence, anchor)
    p = period_at(spec, t)
    assert p.start <= t < p.end
    index = period_index(spec, t)
    assert nth_period(spec, index + 1).start == p.end
    assert nth_period(spec, index - 1).end == p.start
    assert p.end - p.start >= WEEK


def test_opening_posts_allocations_and_only_configured_carry_over() -> None:
    spec = PeriodSpec(Cadence.WEEKLY, T0)
    p = period_at(spec, T0)
    allocations = {"a": 100, "b": 50, "zero": 0}
    closing = {"a": 30, "b": -20}
    plain = opening_entries(p, allocations, closing, Rollover())
    assert [(e.budget, e.kind, e.amount) for e in plain] == [
        ("a", EntryKind.ALLOCATION, 100),
        ("b", EntryKind.ALLOCATION, 50),
    ]
    credit = opening_entries(p, allocations, closing, Rollover(carry_credit=True))
    assert [(e.budget, e.kind, e.amount) for e in credit][2:] == [("a", EntryKind.CARRYOVER, 30)]
    both = opening_entries(p, allocations, closing, Rollover(carry_credit=True, carry_debt=True))
    assert [(e.budget, e.amount, e.key) for e in both][2:] == [
        ("a", 30, f"carry:a:{p.id}"),
        ("b", -20, f"carry:b:{p.id}"),
    ]
    assert all(e.period_id == p.id and e.at == p.start for e in both)
    with pytest.raises(ValueError, match="negative"):
        opening_entries(p, {"a": -1}, {}, Rollover())
