"""The Clock port: where the engine gets `now` and how it waits.

Owns: the Clock Protocol. Must not: implement a clock (the system clock lives in the engine, the simulated one in
the simulator).
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now(self) -> int:
        """Current time in whole seconds on the engine's time axis."""
        ...

    def wait(self, seconds: float) -> None:
        """Block (or, for a simulated clock, advance) for up to `seconds`."""
        ...
