"""Roll-ups up the budget tree and decayed fair-share usage (the run-out forecast: test_forecast.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allotment.core.model import Budget
from allotment.ledger import decayed, leaves, overcommitted, rollup, usage_after
from allotment.ledger.tree import ancestors, depths

from .conftest import H100, T0

TREE = [
    Budget("org", None, 100),
    Budget("vision", "org", 60),
    Budget("detect", "vision", 40),
    Budget("segment", "vision", 30),
    Budget("chat", "org", 40),
]
PARENTS = {b.name: b.parent for b in TREE}


def test_leaves_and_overcommitment() -> None:
    assert leaves(TREE) == {"detect", "segment", "chat"}
    assert overcommitted(TREE) == {"vision": 10}


def test_rollup_sums_each_subtree() -> None:
    totals = rollup({"detect": 5, "segment": -2, "chat": 7}, PARENTS)
    assert totals == {"org": 10, "vision": 3, "detect": 5, "segment": -2, "chat": 7}
    with pytest.raises(ValueError, match="cycle"):
        rollup({"a": 1}, {"a": "b", "b": "a"})


def test_usage_is_full_price_credits_with_decay() -> None:
    week = 7 * 86_400
    one_hour = usage_after(0.0, T0, T0 + 3600, week, 8 * H100)
    assert 7.98 < one_hour < 8.0  # 8 GPU-hours at full price, the earliest minutes slightly decayed
    assert decayed(one_hour, T0, T0 + week, week) == pytest.approx(one_hour / 2)
    assert usage_after(5.0, T0, T0, week, 8 * H100) == 5.0
    assert usage_after(5.0, T0, T0 + 10, 0, 8 * H100) == 0.0


@given(
    usage=st.floats(min_value=0, max_value=1e6),
    rate=st.integers(min_value=0, max_value=10**9),
    steps=st.lists(st.integers(min_value=1, max_value=86_400), min_size=1, max_size=20),
    half_life=st.integers(min_value=60, max_value=10**7),
)
def test_updating_often_or_once_gives_the_same_usage(usage: float, rate: int, steps: list[int], half_life: int) -> None:
    often, t = usage, T0
    for step in steps:
        often = usage_after(often, t, t + step, half_life, rate)
        t += step
    once = usage_after(usage, T0, t, half_life, rate)
    assert often == pytest.approx(once, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("parents", "expected"),
    [
        pytest.param({"r": None, "a": "r", "b": "a"}, {"r": 0, "a": 1, "b": 2}, id="chain"),
        pytest.param({"b": "a", "a": "r", "r": None}, {"r": 0, "a": 1, "b": 2}, id="listed-deepest-first"),
        pytest.param({"x": "outside", "y": "x"}, {"x": 1, "y": 2}, id="parent-outside-the-map"),
        pytest.param({"a": "b", "b": "a"}, None, id="cycle"),
        pytest.param({"r": None, "a": "a"}, None, id="self-parent"),
    ],
)
def test_depths_agree_with_ancestors(parents: dict[str, str | None], expected: dict[str, int] | None) -> None:
    if expected is None:
        with pytest.raises(ValueError, match="cycle"):
            depths(parents)
        return
    assert depths(parents) == expected == {n: len(ancestors(n, parents)) for n in parents}


@given(st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=30))
def test_depths_of_any_forest_match_ancestors(links: list[int]) -> None:
    parents: dict[str, str | None] = {f"n{i}": (f"n{p}" if p < i else None) for i, p in enumerate(links)}
    assert depths(parents) == {n: len(ancestors(n, parents)) for n in parents}
