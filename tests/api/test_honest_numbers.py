"""Honest numbers (issue 23) through the API: one run-out forecast, the same in every view, with its rate window
shown and never a date past the period end unlabelled (decision 57)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api

DAY = 86_400
PERIOD_END = 1_796_083_200  # 2026-12-01T00:00:00Z: the small example's first period ends


def forecasts(api: Api, budget: str) -> dict[str, dict[str, Any]]:
    """The forecast of `budget` as each view returns it."""
    paces = api.call("GET", "/dashboard/budgets", "eli").json()["budgets"]
    overview = api.call("GET", "/dashboard/overview", "eli").json()["fastest"]
    views = {
        "budget": api.call("GET", f"/budgets/{budget}", "eli").json()["forecast"],
        "paces": next(b["forecast"] for b in paces if b["name"] == budget),
        "burndown": api.call("GET", f"/dashboard/budgets/{budget}/burndown", "eli").json()["forecast"],
    }
    fastest = [b["forecast"] for b in overview if b["name"] == budget]
    if fastest:
        views["overview"] = fastest[0]
    return views


def run_a_day(api: Api, user: str, budget: str, gpus: int, replicas: int = 1) -> int:
    """Run one job for a day, cycling every hour; returns the start."""
    api.submit(user, budget, resources={"gpus": gpus, "replicas": replicas})
    t = api.rig.clock.now()
    api.rig.step()
    for hour in range(1, 25):
        api.rig.step(t + hour * 3600)
    return t


def test_a_busy_budget_runs_out_before_the_period_end_the_same_in_every_view(api: Api) -> None:
    t = run_a_day(api, "ben", "pretrain", 8, 3)  # 24 GPUs for a day: 576 credits
    now = t + DAY
    views = forecasts(api, "pretrain")
    assert set(views) == {"budget", "paces", "burndown", "overview"}
    first = views["budget"]
    assert all(v == first for v in views.values()), views
    assert first["window"] == DAY and first["spent_micro"] == 576_000_000 and first["per_hour_micro"] == 24_000_000
    assert first["outcome"] == "runs_out" and first["period_end"] == PERIOD_END
    assert first["runs_out_at"] == now + 7424 * 3600 // 24 < PERIOD_END  # 7,424 credits left at 24 an hour
    # the group above pays for the same spending: its forecast is its subtree's (13,000 − 576 credits left)
    language = forecasts(api, "language")["budget"]
    assert language["spent_micro"] == 576_000_000 and language["runs_out_at"] == now + 12424 * 3600 // 24


def test_a_balance_that_outlives_the_period_says_it_lasts_the_period(api: Api) -> None:
    t = run_a_day(api, "chen", "finetune", 4)  # 96 credits a day: 4,904 left would last 51 more days, 29 remain
    views = forecasts(api, "finetune")
    first = views["budget"]
    assert all(v == first for v in views.values()), views
    assert first["outcome"] == "lasts_period" and first["runs_out_at"] is None
    left = 4904_000_000 - 96_000_000 * (PERIOD_END - (t + DAY)) // DAY
    assert first["left_at_end_micro"] == max(0, left)
    idle = forecasts(api, "segmentation")["budget"]
    assert idle["outcome"] == "lasts_period" and idle["spent_micro"] == 0
    assert idle["left_at_end_micro"] == 4000_000_000


@pytest.mark.parametrize(
    "path", ["/budgets/pretrain", "/dashboard/overview", "/dashboard/budgets", "/dashboard/budgets/pretrain/burndown"]
)
def test_another_rate_window_is_refused_not_silently_ignored(api: Api, path: str) -> None:
    response = api.call("GET", f"{path}?window=3600", "eli")
    assert response.status_code == 422
    (problem,) = response.json()["problems"]
    assert problem["field"] == "query.window" and "one rate window" in problem["reason"]
