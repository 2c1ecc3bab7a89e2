"""The one rule for GPU counts that are not a whole number of GPUs, for the API and every importer.

Owns: `whole_gpus`: a count of 1 or more whole GPUs is taken as it is; a fractional count (0.5, 1.5) or a zero-GPU
row is refused with a message that says so — Allotment schedules whole GPUs, and a job without GPUs is CPU work it
does not schedule — unless the caller asks to round up (a scenario's `gpus: round-up`), which takes the next whole
number and 1 for zero. Nothing is ever changed silently: the rounding is the caller's explicit choice.

Must not: read files or know where a count came from (the caller names the place in its own message).
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from enum import StrEnum

from allotment.config.limits import MAX_COUNT

FRACTIONAL = "fractional GPUs are not supported: ask for a whole number of GPUs"
ZERO = "a job needs at least 1 GPU: CPU-only work (0 GPUs) is not scheduled by Allotment"


class GpuRule(StrEnum):
    REFUSE = "refuse"
    ROUND_UP = "round-up"


def whole_gpus(raw: object, rule: GpuRule = GpuRule.REFUSE) -> int:
    """`raw` (a number or its text) as a whole GPU count ≥ 1 under `rule`; ValueError with the reason otherwise."""
    if isinstance(raw, bool):
        raise ValueError(f"a GPU count is a number, not {raw!r}")
    try:
        value = Decimal(str(raw).strip())
    except InvalidOperation:
        raise ValueError(f"a GPU count is a number, not {raw!r}") from None
    if not value.is_finite():
        raise ValueError(f"a GPU count is a number, not {raw!r}")
    if value.adjusted() >= len(str(MAX_COUNT)) or abs(value) > MAX_COUNT:
        raise ValueError(f"a GPU count is at most {MAX_COUNT} (got {raw})")
    whole = value == value.to_integral_value()
    if rule is GpuRule.ROUND_UP:
        if value < 0:
            raise ValueError(f"a GPU count cannot be negative ({raw})")
        return max(1, math.ceil(value))
    if not whole:
        raise ValueError(f"{FRACTIONAL} (got {raw})")
    if value < 1:
        raise ValueError(f"{ZERO} (got {raw})")
    return int(value)
