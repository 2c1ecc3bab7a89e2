"""The backfill timeline's earliest start: one pass over a node's availability steps gives the first time from which
the GPUs stay free for the whole span, as trying every step time in turn does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allotment.policies.timeline import earliest_start


def _by_trying_every_time(times: list[int], levels: list[int], gpus: int, duration: int | None) -> int | None:
    for j, t in enumerate(times):
        end = None if duration is None else t + duration
        if all(levels[k] >= gpus for k in range(j, len(times)) if k == j or end is None or times[k] < end):
            return t
    return None


@st.composite
def _steps(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    gaps = draw(st.lists(st.integers(1, 50), min_size=0, max_size=8))
    times = [0]
    for g in gaps:
        times.append(times[-1] + g)
    levels = draw(st.lists(st.integers(0, 8), min_size=len(times), max_size=len(times)))
    return times, levels


@given(_steps(), st.integers(1, 8), st.none() | st.integers(1, 120))
def test_one_pass_finds_the_first_time_the_gpus_stay_free_for_the_span(
    steps: tuple[list[int], list[int]], gpus: int, duration: int | None
) -> None:
    times, levels = steps
    assert earliest_start(times, levels, gpus, duration) == _by_trying_every_time(times, levels, gpus, duration)


CASES = [
    # (name, times, levels, gpus, duration, expected)
    ("free now for ever", [0, 10], [8, 8], 8, None, 0),
    ("a dip inside the span pushes the start past it", [0, 10, 20], [8, 2, 8], 8, 15, 20),
    ("a dip after the span does not matter", [0, 10, 20], [8, 8, 2], 8, 20, 0),
    ("a span ending exactly at the dip fits", [0, 10], [8, 0], 8, 10, 0),
    ("for ever never fits before a later dip", [0, 10, 20], [8, 8, 2], 8, None, None),
    ("never enough GPUs", [0, 10], [3, 4], 5, 5, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "times", "levels", "gpus", "duration", "expected"), CASES, ids=[c[0] for c in CASES])
def test_earliest_start_cases(
    name: str, times: list[int], levels: list[int], gpus: int, duration: int | None, expected: int | None
) -> None:
    assert earliest_start(times, levels, gpus, duration) == expected
