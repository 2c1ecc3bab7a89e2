"""Hierarchical fair share's what-if queries (fairshare.py): asking what a budget's standing would be after a
change must leave every standing exactly as it was, so that the cycle's later verdicts do not depend on how many
questions were asked before them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from allotment.core.fairshare import FairShare
from allotment.core.model import Budget

TREE = (
    Budget("org", None, 100),
    Budget("lab", "org", 60),
    Budget("ops", "org", 40),
    Budget("alpha", "lab", 30),
    Budget("bravo", "lab", 30),
    Budget("charlie", "ops", 40),
)
LEAVES = ("alpha", "bravo", "charlie")


def _fair_share(usage: dict[str, float]) -> FairShare:
    fs = FairShare(TREE, usage, tau_hours=1.0)
    for leaf in LEAVES:
        fs.mark_active(leaf)
    return fs


def _standings(fs: FairShare) -> list[float]:
    return [fs.standing(b.name) for b in TREE]


def test_a_what_if_query_whose_undo_would_round_leaves_the_usage_exact() -> None:
    # 0.1 + 0.2 - 0.2 == 0.10000000000000003 in floating point: subtracting the change back would not restore it
    fs = _fair_share({"alpha": 0.1, "bravo": 0.3, "charlie": 0.5})
    before = _standings(fs)
    fs.standing_after("alpha", 0.2)
    fs.standings_after_swap("alpha", 0.2, "charlie", 0.7)
    assert _standings(fs) == before


@settings(max_examples=200, deadline=None)
@given(
    usage=st.lists(st.floats(0, 1e6, allow_nan=False), min_size=3, max_size=3),
    queries=st.lists(
        st.tuples(st.sampled_from(LEAVES), st.sampled_from(LEAVES), st.floats(0, 1e4), st.floats(0, 1e4)),
        max_size=20,
    ),
)
def test_what_if_queries_never_change_a_standing(
    usage: list[float], queries: list[tuple[str, str, float, float]]
) -> None:
    fs = _fair_share(dict(zip(LEAVES, usage, strict=True)))
    before = _standings(fs)
    for gainer, loser, gain, loss in queries:
        fs.standing_after(gainer, gain)
        fs.standing_after(loser, -loss)
        if gainer != loser:
            fs.standings_after_swap(gainer, gain, loser, loss)
    assert _standings(fs) == before
