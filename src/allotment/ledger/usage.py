"""Decayed fair-share usage.

Owns: decaying a budget's past usage to a later instant and adding what it held meanwhile. Usage is in
credits at full price (GPUs × rate × hours), independent of the discount a run class gets, because fair
share measures the share of the fleet a budget took, not what it paid.

Must not: read a clock or a database.
"""

from __future__ import annotations

from allotment.core.model import MICRO_PER_CREDIT, Micro, Seconds
from allotment.core.units import SECONDS_PER_HOUR, decay_factor, mean_life


def decayed(usage: float, as_of: Seconds, now: Seconds, half_life: Seconds) -> float:
    """`usage` recorded at `as_of`, as it stands at `now`."""
    return usage * decay_factor(now - as_of, half_life)


def usage_after(usage: float, as_of: Seconds, now: Seconds, half_life: Seconds, rate: Micro) -> float:
    """Usage at `now` for a budget that had `usage` at `as_of` and held GPUs worth `rate`
    credit-microunits per hour at full price throughout [as_of, now).

    The holding is integrated with decay (each second decays from when it was used), so updating every
    cycle or once over the same span gives the same result: rate × mean_life × (1 − decay(span))."""
    span = now - as_of
    if span <= 0:
        return usage
    if half_life <= 0:
        return 0.0  # no memory: everything decays at once
    per_second = rate / MICRO_PER_CREDIT / SECONDS_PER_HOUR
    held = per_second * mean_life(half_life) * (1.0 - decay_factor(span, half_life))
    return decayed(usage, as_of, now, half_life) + held
