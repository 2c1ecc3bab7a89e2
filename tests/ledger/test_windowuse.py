"""Capacity-window use (ledger/windowuse.py): booked, used (capped at the window's GPUs) and unused GPU-seconds."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from allotment.ledger.windowuse import Holding, window_use

S, E = 1_000, 1_000 + 8 * 3600  # an 8-hour window


@dataclass(frozen=True)
class Case:
    holdings: tuple[Holding, ...]
    until: int
    booked: int
    used: int
    gpus: int = 8


CASES = {
    "nobody came: all of it unused": Case((), E, 8 * 8 * 3600, 0),
    "half the GPUs all the time": Case((Holding(S, E, 4),), E, 8 * 8 * 3600, 4 * 8 * 3600),
    "more than the window: only the window's GPUs count": Case(
        (Holding(S, E, 8), Holding(S, E, 8)), E, 8 * 28800, 8 * 28800
    ),
    "runs before and after count only inside": Case(
        (Holding(S - 500, S + 100, 8), Holding(E - 100, E + 900, 8)), E, 8 * 28800, 8 * 200
    ),
    "booked so far while open": Case((Holding(S, S + 776, 1),), S + 976, 976, 776, gpus=1),
    "not yet open: nothing booked": Case((Holding(S, E, 8),), S, 0, 0),
    "overlapping runs stack until the cap": Case(
        (Holding(S, S + 100, 6), Holding(S + 50, S + 100, 6)), S + 100, 800, 6 * 50 + 8 * 50
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_window_use(case: Case) -> None:
    use = window_use(S, E, case.gpus, case.holdings, case.until)
    assert (use.booked, use.used, use.unused) == (case.booked, case.used, case.booked - case.used)
