"""Clocks the engine can run on.

Owns: the system clock (Unix seconds) and a scaled clock that runs a fixed factor faster than the wall, from an
origin (for time-compressed tests and demos). Must not: decide or store anything.
"""

from __future__ import annotations

import time


class SystemClock:
    def now(self) -> int:
        return int(time.time())

    def wait(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class ScaledClock:
    """Engine seconds pass `factor` times faster than wall seconds, counted from `origin` (engine time) at
    `wall_origin` (wall time): a restarted process given the same origins continues the same timeline."""

    def __init__(self, factor: float, origin: int, wall_origin: float) -> None:
        if factor <= 0:
            raise ValueError("factor must be positive")
        self.factor = factor
        self.origin = origin
        self.wall_origin = wall_origin

    def now(self) -> int:
        return self.origin + int((time.time() - self.wall_origin) * self.factor)

    def wait(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds / self.factor))

    def wall_seconds(self, engine_seconds: float) -> float:
        return engine_seconds / self.factor
