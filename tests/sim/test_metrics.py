"""Metrics on tiny hand-computed cases (docs/simulation.md, "Metrics")."""

from __future__ import annotations

import math

import pytest

from allotment.sim.metrics import (
    capped_demand,
    compute,
    drain_empty_hours,
    fairness,
    jain,
    quantile,
    utilisation_when_contended,
    water_fill,
)
from allotment.sim.seeds import headline
from tests.sim.builders import ResultBuilder

H = 3600


@pytest.mark.parametrize(
    ("name", "xs", "q", "expected"),
    [
        ("single value", [5.0], 0.5, 5.0),
        ("median of an even count interpolates", [1.0, 3.0], 0.5, 2.0),
        ("p95 of 0..100", [float(x) for x in range(101)], 0.95, 95.0),
    ],
)
def test_quantile(name: str, xs: list[float], q: float, expected: float) -> None:
    assert quantile(xs, q) == pytest.approx(expected), name


@pytest.mark.parametrize(
    ("name", "xs", "expected"),
    [
        ("all equal is perfectly fair", [1.0, 1.0, 1.0, 1.0], 1.0),
        ("one takes everything is 1/n", [1.0, 0.0, 0.0, 0.0], 0.25),
        ("two to one", [2.0, 1.0], 9 / 10),
    ],
)
def test_jain(name: str, xs: list[float], expected: float) -> None:
    assert jain(xs) == pytest.approx(expected), name


@pytest.mark.parametrize(
    ("name", "capacity", "demand", "weight", "expected"),
    [
        ("by weight when all want more", 90, {"a": 100, "b": 100}, {"a": 2, "b": 1}, {"a": 60, "b": 30}),
        ("a sated budget's rest flows on", 90, {"a": 10, "b": 100}, {"a": 2, "b": 1}, {"a": 10, "b": 80}),
        ("no demand, no share", 50, {"a": 0, "b": 100}, {"a": 1, "b": 1}, {"a": 0, "b": 50}),
    ],
)
def test_water_fill(
    name: str, capacity: float, demand: dict[str, float], weight: dict[str, float], expected: dict[str, float]
) -> None:
    got = water_fill(capacity, demand, weight)
    assert got == pytest.approx(expected), name


@pytest.mark.parametrize(
    ("name", "capacity", "demand", "groups", "expected"),
    [
        (
            "a full group's rest flows outside it",
            90,
            {"a": 100, "b": 100, "c": 100},
            [({"a", "b"}, 20)],
            {"a": 10, "b": 10, "c": 70},
        ),
        (
            "inside a full group, a sated member's rest flows to its sibling",
            90,
            {"a": 4, "b": 100, "c": 100},
            [({"a", "b"}, 20)],
            {"a": 4, "b": 16, "c": 70},
        ),
        (
            "a group above its members' demand changes nothing",
            90,
            {"a": 100, "b": 100, "c": 100},
            [({"a", "b"}, 500)],
            {"a": 30, "b": 30, "c": 30},
        ),
        (
            "nested groups: the tighter one binds first",
            90,
            {"a": 100, "b": 100, "c": 100},
            [({"a", "b", "c"}, 60), ({"a"}, 5)],
            {"a": 5, "b": 27.5, "c": 27.5},
        ),
    ],
)
def test_water_fill_within_group_limits(
    name: str,
    capacity: float,
    demand: dict[str, float],
    groups: list[tuple[set[str], float]],
    expected: dict[str, float],
) -> None:
    got = water_fill(capacity, demand, dict.fromkeys(demand, 1.0), groups)
    assert got == pytest.approx(expected), name


def test_utilisation_counts_only_contended_time() -> None:
    # 8 GPUs. 0–1 h: offered 16, busy 8 (contended, full); 1–2 h: offered 16, busy 4 (contended, half);
    # 2–3 h: offered 4 (not contended).
    points = [(0, 8, 16), (H, 4, 16), (2 * H, 4, 4)]
    util, seconds = utilisation_when_contended(points, 8, 3 * H)
    assert seconds == 2 * H
    assert util == pytest.approx(0.75)


def test_never_contended_is_nan() -> None:
    util, seconds = utilisation_when_contended([(0, 4, 4)], 8, H)
    assert math.isnan(util) and seconds == 0


def test_drained_node_empties_when_its_last_job_leaves() -> None:
    r = (
        ResultBuilder()
        .job("a", runs=((0, 5 * H),), node="n0")
        .job("b", runs=((H, 3 * H),), node="n0")
        .job("c", runs=((0, 9 * H),), node="n1")
        .drain("n0", 2 * H)
        .drain("n1", 9 * H + 1)
        .drain("n1", H, hard=True)
        .build()
    )
    assert drain_empty_hours(r) == [3.0, 0.0]


def test_fairness_compares_received_with_water_filled_entitlement() -> None:
    # Budgets a:b = 3:1 by allocation on 8 GPUs for 4 h; a asks for 8 GPUs and gets 2, b asks for 6 and gets 6.
    builder = ResultBuilder(fleet=8, duration=4 * H).budget("a", 3).budget("b", 1)
    builder.job("a1", budget="a", gpus=2, runs=((0, None),)).job("b1", budget="b", gpus=6, runs=((0, None),))
    builder.job("a2", budget="a", gpus=6, submit=0)
    per_budget, index = fairness(builder.build())
    # delivered 8 GPUs × 4 h, water-filled 3:1 → entitled a 6 GPUs, b 2; received a 2, b 6
    assert per_budget["a"] == pytest.approx(1 / 3)
    assert per_budget["b"] == pytest.approx(3.0)
    assert index == pytest.approx(jain([1 / 3, 3.0]))


@pytest.mark.parametrize(
    ("name", "spans", "cap", "window", "expected"),
    [
        ("no limit: the sum of GPUs × time", [(0, 2 * H, 8), (H, 3 * H, 8)], None, (0, 10 * H), 32 * H),
        ("a limit counts at most its GPUs at each instant", [(0, 2 * H, 8), (H, 3 * H, 8)], 8, (0, 10 * H), 24 * H),
        ("below the limit nothing changes", [(0, H, 4), (0, H, 2)], 8, (0, 10 * H), 6 * H),
        ("only the window counts", [(0, 10 * H, 16)], 8, (H, 3 * H), 16 * H),
    ],
)
def test_capped_demand(
    name: str, spans: list[tuple[int, int, int]], cap: int | None, window: tuple[int, int], expected: float
) -> None:
    assert capped_demand(spans, cap, *window) == pytest.approx(expected), name


def test_a_budget_is_entitled_to_no_more_than_its_gpu_limit() -> None:
    # Equal allocations on 8 GPUs for 4 h; a asks for 8 GPUs but may hold 2 (max_gpus), and holds 2; b holds 6.
    builder = ResultBuilder(fleet=8, duration=4 * H).budget("a", 1, max_gpus=2).budget("b", 1)
    builder.job("a1", budget="a", gpus=2, runs=((0, None),)).job("a2", budget="a", gpus=6, submit=0)
    builder.job("b1", budget="b", gpus=6, runs=((0, None),))
    per_budget, index = fairness(builder.build())
    # demand a: 2 GPUs (its limit), b: 6 → entitled a 2, b 6: both received what they were entitled to
    assert per_budget == pytest.approx({"a": 1.0, "b": 1.0})
    assert index == pytest.approx(1.0)


def test_leaves_under_a_group_limit_share_its_entitlement() -> None:
    # Equal allocations on 16 GPUs for 4 h; a and b sit under a group that may hold 8 GPUs, and each asks for 8;
    # c asks for 8. a holds the group's 8, b none, c 8.
    builder = ResultBuilder(fleet=16, duration=4 * H).budget("a", 1).budget("b", 1).budget("c", 1)
    builder.group("g", ("a", "b"), 8)
    builder.job("a1", budget="a", gpus=8, runs=((0, None),)).job("b1", budget="b", gpus=8, submit=0)
    builder.job("c1", budget="c", gpus=8, runs=((0, None),))
    per_budget, _ = fairness(builder.build())
    # the group's 8 GPUs are split a 4, b 4; c is entitled to the other 8: a received twice its share, b nothing
    assert per_budget == pytest.approx({"a": 2.0, "b": 0.0, "c": 1.0})


def test_compute_counts_preemptions_lost_work_overdrafts_and_starvation() -> None:
    r = (
        ResultBuilder(fleet=8, duration=30 * H)
        .job("p", runs=((0, H), (2 * H, 3 * H)), preempted=("fair-share",), lost=(600,))
        .job("idle", cls="session", runs=((0, H),), preempted=("idle-session",), submit=0)
        .job("late", submit=0, runs=((26 * H, 27 * H),))
        .job("never", submit=H)
        .balance("a@2026-11-01", -5)
        .balance("b@2026-11-01", 3)
        .balance("infrastructure@2026-11-01", -2)
        .build()
    )
    m = compute(r)
    assert m.preemptions == 1  # an idle session reclaimed is not a preemption
    assert m.gpu_hours_lost == pytest.approx(8 * 600 / H)
    assert (m.overdrafts, m.overdraft_credits) == (1, 5.0)
    assert m.starved == 2  # "late" waited 26 h, "never" 29 h
    assert m.session_latency.n == 1 and m.sessions_within_60s == 1.0
    assert (m.finished, m.unfinished) == (3, 1)
    assert m.waits_by_size["2-8"].n == 4


def test_opportunistic_jobs_finished_and_lost_share_of_held_gpu_hours() -> None:
    # 8-GPU jobs: "p" held 1 h + 1 h and lost 30 min to its preemption; "o1" finished, "o2" never started.
    r = (
        ResultBuilder(fleet=8, duration=10 * H)
        .job("p", runs=((0, H), (2 * H, 3 * H)), preempted=("reservation",), lost=(1800,))
        .job("o1", runs=((3 * H, 4 * H),), contract="opportunistic")
        .job("o2", submit=H, contract="opportunistic")
        .build()
    )
    m = compute(r)
    assert (m.opportunistic, m.opportunistic_finished) == (2, 1)
    assert m.gpu_hours_held == pytest.approx(8 * 3)
    h = headline(m)
    assert h["opportunistic_finished"] == pytest.approx(50.0)
    assert h["lost_share"] == pytest.approx(100 * 4 / 24)  # 8 GPUs × 0.5 h of the 24 GPU-hours held


def test_no_opportunistic_jobs_and_no_runs_are_not_a_number() -> None:
    h = headline(compute(ResultBuilder(fleet=8, duration=H).job("w", submit=0).build()))
    assert math.isnan(h["opportunistic_finished"]) and math.isnan(h["lost_share"])
