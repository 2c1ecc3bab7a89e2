"""The run-out forecast: when a budget's balance reaches zero at its recent rate, read against the period's end.

Owns: the one forecast every view shows (API, SDK, CLI, dashboard; decision 57). The rate is the net spending
(charges less refunds) of the budget's subtree over one rate window, `RATE_WINDOW`: the trailing 24 hours ending now,
(now − 24 h, now]. At that rate the balance either is gone already (`exhausted`), runs out before the period ends
(`runs_out`, at `runs_out_at`, always before the period end), or outlives the period (`lasts_period`: nothing is
spent, or zero is reached only at or after the period end). A date past the period end is never given: the balance
renews with the next period's allocation, so such a date means nothing.

Must not: read a clock or a database, or choose another window; callers pass the balance, what was spent in the
window, now and the period's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from allotment.core.model import Micro, Seconds

RATE_WINDOW: Seconds = 24 * 3600
"""The one rate window of the forecast: the trailing 24 hours."""


class Outcome(StrEnum):
    EXHAUSTED = "exhausted"
    """Nothing is left now."""
    RUNS_OUT = "runs_out"
    """At the window's rate the balance reaches zero before the period ends."""
    LASTS_PERIOD = "lasts_period"
    """At the window's rate the balance lasts until the period ends (or nothing is being spent)."""


@dataclass(frozen=True, slots=True)
class Forecast:
    window: Seconds
    """The rate window: `RATE_WINDOW`."""
    spent: Micro
    """Net credit-microunits spent in the window: charges less refunds."""
    per_hour: Micro
    """The average spend per hour over the window, rounded down."""
    outcome: Outcome
    runs_out_at: Seconds | None
    """`now` when exhausted; the instant the balance reaches zero (rounded up to a whole second, before the period
    end) when it runs out; None when it lasts the period."""
    period_end: Seconds
    left_at_end: Micro
    """What is left at the period end at this rate (0 unless it lasts the period)."""


def forecast(
    balance: Micro, spent: Micro, now: Seconds, period_end: Seconds, window: Seconds = RATE_WINDOW
) -> Forecast:
    """The forecast of `balance` given `spent` over the trailing `window` ending `now`, in a period ending at
    `period_end`. Raises on a window that is not positive."""
    if window <= 0:
        raise ValueError("the rate window must be positive")
    per_hour = spent * 3600 // window
    if balance <= 0:
        return Forecast(window, spent, per_hour, Outcome.EXHAUSTED, now, period_end, 0)
    remaining_time = max(0, period_end - now)
    if spent > 0:
        runs_out = now + -(-balance * window // spent)
        if runs_out < period_end:
            return Forecast(window, spent, per_hour, Outcome.RUNS_OUT, runs_out, period_end, 0)
    left = balance - max(0, spent) * remaining_time // window
    return Forecast(window, spent, per_hour, Outcome.LASTS_PERIOD, None, period_end, max(0, left))
