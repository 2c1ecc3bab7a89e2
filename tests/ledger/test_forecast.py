"""The run-out forecast (ledger/forecast.py, decision 57): one rate window, and never a date past the period end —
a balance that outlives the period says it lasts the period."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from allotment.ledger import RATE_WINDOW, Outcome, forecast

from .conftest import H100, T0

DAY = 86_400


@dataclass(frozen=True)
class Case:
    balance: int
    spent: int
    """Net spending in the rate window (the trailing day)."""
    days_left: int
    """Days from now to the period end."""
    outcome: Outcome
    runs_out_after: int | None
    """Seconds from now to the run-out instant."""
    left_at_end: int = 0


CASES = {
    "runs out before the period end at the day's rate": Case(
        10 * H100, 4 * H100, 30, Outcome.RUNS_OUT, 2 * DAY + DAY // 2
    ),
    "outlives the period end: lasts the period, with what is left then": Case(
        100 * H100, 2 * H100, 30, Outcome.LASTS_PERIOD, None, 40 * H100
    ),
    "reaching zero exactly at the period end lasts the period": Case(
        30 * H100, H100, 30, Outcome.LASTS_PERIOD, None, 0
    ),
    "nothing spent: lasts the period with all of it": Case(5 * H100, 0, 30, Outcome.LASTS_PERIOD, None, 5 * H100),
    "refunds outweighing charges: lasts the period, nothing added": Case(
        5 * H100, -H100, 30, Outcome.LASTS_PERIOD, None, 5 * H100
    ),
    "nothing left: exhausted now": Case(0, H100, 30, Outcome.EXHAUSTED, 0),
    "overdrawn by opportunistic fallback: exhausted now": Case(-H100, H100, 30, Outcome.EXHAUSTED, 0),
    "a partial second rounds up": Case(1, 3600, 30, Outcome.RUNS_OUT, 24),
    "the period already ended: lasts it": Case(H100, H100, 0, Outcome.LASTS_PERIOD, None, H100),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_forecast(case: Case) -> None:
    end = T0 + case.days_left * DAY
    f = forecast(case.balance, case.spent, T0, end)
    assert f.outcome is case.outcome
    assert f.runs_out_at == (None if case.runs_out_after is None else T0 + case.runs_out_after)
    assert f.runs_out_at is None or f.runs_out_at < end or f.outcome is Outcome.EXHAUSTED
    assert (f.window, f.spent, f.period_end, f.left_at_end) == (RATE_WINDOW, case.spent, end, case.left_at_end)
    assert f.per_hour == case.spent * 3600 // RATE_WINDOW


def test_the_rate_window_is_one_day_and_must_be_positive() -> None:
    assert RATE_WINDOW == DAY
    with pytest.raises(ValueError, match="positive"):
        forecast(1, 1, T0, T0 + DAY, window=0)
