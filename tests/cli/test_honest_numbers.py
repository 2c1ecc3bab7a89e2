"""Honest numbers (issue 23) on the command line, against a live server: `allot budget show` gives the one run-out
forecast with its rate window, says "lasts the period" rather than a date past the period end, and has no --window."""

from __future__ import annotations

import time

import pytest

from allotment.cli.render import forecast_text
from allotment.sdk import models as m
from tests.cli.conftest import Allot
from tests.spending import leave_remaining, spend

NOW = 1_796_000_000
END = NOW + 10 * 86_400


def forecast(outcome: str, runs_out_at: int | None = None, left: int = 0) -> m.Forecast:
    return m.Forecast(
        window=86_400,
        spent_micro=48_000_000,
        per_hour_micro=2_000_000,
        outcome=outcome,
        runs_out_at=runs_out_at,
        period_end=END,
        left_at_end_micro=left,
    )


@pytest.mark.parametrize(
    ("shown", "says", "never"),
    [
        (forecast("runs_out", NOW + 3 * 86_400), "runs out 2026-", "lasts"),
        (forecast("lasts_period", None, 12_500_000), "lasts the period", "runs out"),
        (forecast("exhausted", NOW), "exhausted", "runs out"),
    ],
    ids=["runs-out-before-the-period-end", "lasts-the-period-with-what-is-left", "exhausted"],
)
def test_the_forecast_reads_as_one_of_three_outcomes(shown: m.Forecast, says: str, never: str) -> None:
    text = forecast_text(shown, NOW)
    assert says in text and never not in text
    if shown.outcome == "lasts_period":
        assert "12.500 credits left" in text


def test_budget_show_forecasts_the_run_out_the_same_as_the_api(allot: Allot) -> None:
    assert "No such option" in allot("ben", "budget", "show", "pretrain", "--window", "3600", code=2).output
    idle = allot.json("ben", "budget", "show", "segmentation")["forecast"]
    assert idle["window"] == 86_400 and idle["outcome"] == "lasts_period" and idle["runs_out_at"] is None
    shown = allot("ben", "budget", "show", "segmentation").stdout
    assert "over the last 24 h" in shown and "lasts the period" in shown

    spend(allot.live, "eli", "finetune")
    spent = allot.json("eli", "budget", "show", "finetune")["forecast"]["spent_micro"]
    assert spent > 0
    leave_remaining(allot.live, "finetune", spent // 2)  # half a day's spending left: runs out in about 12 h
    before = time.time()
    ahead = allot.json("eli", "budget", "show", "finetune")["forecast"]
    assert ahead["outcome"] == "runs_out" and before < ahead["runs_out_at"] < ahead["period_end"]
    assert abs(ahead["runs_out_at"] - (before + 43_200)) < 120
    text = allot("eli", "budget", "show", "finetune").stdout
    assert "runs out" in text and "before the period ends" in text and "lasts" not in text

    leave_remaining(allot.live, "finetune", -1)
    assert allot.json("eli", "budget", "show", "finetune")["forecast"]["outcome"] == "exhausted"
    assert "exhausted" in allot("eli", "budget", "show", "finetune").stdout
