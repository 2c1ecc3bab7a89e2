"""Capacity-window use: how much of what a window booked its budget used — the squatting signal of docs/policy.md §7.

Owns: the arithmetic. A window books `gpus` GPUs of a pool over [start, end); up to `until` (now, or the window's
end) it has booked gpus × elapsed GPU-seconds. Its budget used, at each instant, the GPUs its runs held on the pool,
counted up to the window's size (GPUs beyond it are ordinary work, not the window's); unused is the difference.

Must not: read a clock or a database; callers pass the window, the runs' holdings on the pool and `until`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from allotment.core.model import Seconds


@dataclass(frozen=True, slots=True)
class Holding:
    """GPUs of the pool a run of the window's budget held over [start, end)."""

    start: Seconds
    end: Seconds
    gpus: int


@dataclass(frozen=True, slots=True)
class WindowUse:
    booked: int
    """GPU-seconds booked so far: gpus × (min(until, end) − start), never negative."""
    used: int
    """GPU-seconds of it the budget's runs held (at most the window's GPUs at any instant)."""

    @property
    def unused(self) -> int:
        return self.booked - self.used


def window_use(start: Seconds, end: Seconds, gpus: int, holdings: Iterable[Holding], until: Seconds) -> WindowUse:
    """The use of a window of `gpus` GPUs over [start, end) up to `until`."""
    stop = min(end, until)
    if stop <= start or gpus <= 0:
        return WindowUse(0, 0)
    changes: dict[Seconds, int] = {}
    for h in holdings:
        a, b = max(h.start, start), min(h.end, stop)
        if b > a and h.gpus > 0:
            changes[a] = changes.get(a, 0) + h.gpus
            changes[b] = changes.get(b, 0) - h.gpus
    used, held, last = 0, 0, start
    for t in sorted(changes):
        used += min(held, gpus) * (t - last)
        held += changes[t]
        last = t
    return WindowUse(gpus * (stop - start), used)
