"""Money and time arithmetic of the core: exact integer costs and usage decay.

Owns: the cost of holding GPUs for a span of time (integer credit-microunits, rounded down on the cumulative total so
that charges over consecutive pieces of one run add up exactly to the charge of the whole run), and the exponential
decay of past usage.

Must not: read a clock or hold state.
"""

from __future__ import annotations

from allotment.core.model import FULL_PRICE, Micro, Seconds

SECONDS_PER_HOUR = 3600


def cost(gpus: int, rate: Micro, price: int, seconds: Seconds) -> Micro:
    """Credit-microunits for `gpus` GPUs of a type costing `rate` micro per GPU-hour, at per-mille `price`,
    held for `seconds`. Rounded down: the ledger charges cumulative totals, so the rounding never accumulates."""
    if seconds <= 0 or gpus <= 0:
        return 0
    return gpus * rate * price * seconds // (SECONDS_PER_HOUR * FULL_PRICE)


def charge_between(gpus: int, rate: Micro, price: int, start: Seconds, since: Seconds, until: Seconds) -> Micro:
    """The charge for the piece [since, until) of a run that began at `start`: the difference of cumulative
    costs, so the pieces of a run always sum to cost(whole run)."""
    return cost(gpus, rate, price, until - start) - cost(gpus, rate, price, since - start)


def decay_factor(elapsed: Seconds, half_life: Seconds) -> float:
    """How much of a usage amount remains after `elapsed` seconds."""
    if elapsed <= 0:
        return 1.0
    if half_life <= 0:
        return 0.0
    return float(0.5 ** (elapsed / half_life))


def mean_life(half_life: Seconds) -> float:
    """Seconds over which a steady holding accumulates the same decayed usage it converges to (h / ln 2)."""
    return half_life / 0.6931471805599453
