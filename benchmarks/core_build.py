"""Which build of the scheduling core a benchmark measures: pure Python, or compiled with mypyc (decision 40)."""

from __future__ import annotations

import allotment.core.cycle


def core_build() -> str:
    compiled = not allotment.core.cycle.__file__.endswith(".py")
    return "core: compiled with mypyc" if compiled else "core: pure Python"
