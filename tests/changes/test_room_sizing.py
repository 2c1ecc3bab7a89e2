"""Rule `adaptive-room` (changes/room.py): each cluster's session room is the configured floor, raised to the trailing
window's quantile of concurrent session GPUs (time-weighted) and to the largest recent session's GPUs on one node,
capped by the ceiling; the statistic is plain JSON in the engine state, so a restart (or another store) forgets
nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from allotment.changes.room import advance, demand_sample, room_sizes, with_rooms
from allotment.core.model import JobKind, SessionRoom, Snapshot
from tests.core.builders import HOUR, World


def _world(**policy: object) -> World:
    w = World().cluster("a", nodes=2).cluster("b", nodes=1).budget("red")
    return w.policy(default_headroom=2, **policy)


def _statistic(snap: Snapshot, levels: list[tuple[int, int]], start: int = 0) -> dict[str, object]:
    """The statistic after cluster a spent each (seconds, session GPUs) in turn."""
    memo: object = None
    now = start
    for seconds, gpus in levels:
        memo = advance(memo, {"a": (gpus, min(gpus, 8)), "b": (0, 0)}, now, snap.policy.room_window)
        now += seconds
    return advance(memo, {"a": (0, 0), "b": (0, 0)}, now, snap.policy.room_window)


def test_what_sessions_hold_and_ask_for_is_the_demand_of_their_cluster() -> None:
    w = _world()
    w.running("s1", "red", {"a-h100-00": 3}, kind=JobKind.SESSION)
    w.session("s2", "red", gpus=8, user="bob")  # may run anywhere: counted where it would start, on a
    w.session("s3", "red", gpus=2, user="carol", clusters=("b",))
    sample = demand_sample(w.snapshot())
    assert sample == {"a": (3 + 8, 8), "b": (2, 2)}


def _mixed() -> World:
    """Cluster a: H100 (1 credit an hour); cluster b: B200 (1.6); cluster c: H100."""
    w = World().cluster("a", nodes=1).cluster("b", nodes=1, gpu_type="B200").cluster("c", nodes=1).budget("red")
    return w.policy(default_headroom=2)


@pytest.mark.parametrize(
    ("name", "asks", "where"),
    [
        ("naming nothing, the cheapest type first, then the cluster's name", {}, "a"),
        ("the GPU type it names", {"gpu_types": ("B200",)}, "b"),
        ("the first of the types it lists", {"gpu_types": ("B200", "H100")}, "b"),
        ("the first of the clusters it lists", {"clusters": ("c", "a")}, "c"),
        ("a cheaper type before a cluster listed first", {"clusters": ("b", "c")}, "c"),
    ],
)
def test_a_waiting_session_is_demand_once_where_it_would_start(name: str, asks: dict[str, Any], where: str) -> None:
    # rule `room-where-sessions-start`: the pool order placement uses (placement.pool_preference)
    w = _mixed()
    w.session("s", "red", gpus=4, **asks)
    sample = demand_sample(w.snapshot())
    assert sample == {c: ((4, 4) if c == where else (0, 0)) for c in "abc"}, name


def test_every_waiting_sessions_gpus_are_counted_exactly_once() -> None:
    w = _mixed()
    wishes: list[dict[str, Any]] = [
        {}, {"gpu_types": ("B200",)}, {"clusters": ("c",)}, {}, {"clusters": ("b", "c")}
    ]  # fmt: skip
    for i, asks in enumerate(wishes):
        w.session(f"s{i}", "red", gpus=i + 1, user=f"u{i}", **asks)
    sample = demand_sample(w.snapshot())
    assert sum(level for level, _ in sample.values()) == 1 + 2 + 3 + 4 + 5


def test_a_session_over_its_owners_limit_is_not_demand() -> None:
    w = _world(session_max_per_user=1)
    w.running("s1", "red", {"a-h100-00": 2}, kind=JobKind.SESSION, user="ann")
    w.session("s2", "red", gpus=4, user="ann")
    assert demand_sample(w.snapshot())["a"] == (2, 2)


@pytest.mark.parametrize(
    ("levels", "quantile", "want"),
    [
        pytest.param([(98 * 60, 0), (120, 16)], 990, 16, id="two-minutes-in-a-hundred-make-the-p99"),
        pytest.param([(98 * 60, 0), (120, 16)], 900, 2, id="but-not-the-p90-the-floor-stays"),
        pytest.param([(3600, 4), (3600, 6)], 990, 6, id="the-busier-hour"),
        pytest.param([(3600, 64)], 990, 32, id="capped-by-the-ceiling"),
        pytest.param([], 990, 2, id="no-history-keeps-the-floor"),
    ],
)
def test_the_room_is_the_floor_raised_to_the_quantile_of_demand_and_capped(
    levels: list[tuple[int, int]], quantile: int, want: int
) -> None:
    snap = _world(room_quantile=quantile, room_whole_node=False).snapshot()
    assert room_sizes(_statistic(snap, levels), snap)["a"].gpus == want


def test_a_whole_node_session_keeps_a_whole_node_in_the_room() -> None:
    snap = _world().snapshot()
    size = room_sizes(_statistic(snap, [(99 * 3600, 0), (60, 8)]), snap)["a"]
    assert (size.gpus, size.whole, size.shape) == (8, 8, 8)
    assert with_rooms(snap, {"a": size}).room == {"a": SessionRoom(8, 8)}


def test_demand_older_than_the_window_is_forgotten() -> None:
    snap = _world(room_window=24 * HOUR).snapshot()
    memo = _statistic(snap, [(3600, 16)])
    later = advance(memo, {"a": (0, 0), "b": (0, 0)}, 3 * 24 * HOUR, snap.policy.room_window)
    assert room_sizes(later, snap)["a"].gpus == 2
    assert room_sizes(later, snap)["a"].whole == 0


def test_a_zero_window_keeps_the_room_at_its_floor() -> None:
    snap = _world(room_window=0).snapshot()
    memo = _statistic(replace(snap, policy=replace(snap.policy, room_window=HOUR)), [(3600, 16)])
    assert room_sizes(memo, snap)["a"].gpus == 2


def test_the_statistic_survives_json_so_every_store_keeps_it_alike() -> None:
    snap = _world().snapshot()
    memo = _statistic(snap, [(600, 3), (1200, 5), (60, 8)], start=1_700_000_000)
    again = json.loads(json.dumps(memo))
    assert again == memo
    assert room_sizes(again, snap) == room_sizes(memo, snap)


def test_an_unreadable_statistic_starts_afresh() -> None:
    snap = _world().snapshot()
    memo = advance("garbage", {"a": (4, 4)}, 100, snap.policy.room_window)
    assert room_sizes(memo, snap)["a"].gpus == 4  # the shape seen now counts at once; the level from the next cycle
