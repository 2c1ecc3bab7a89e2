"""Honest numbers (issue 23) on the command line, against a live server whose policy allows 5-second slices:
`allot budget show` gives the one run-out forecast with its rate window, says "lasts the period" rather than a date
past the period end, and has no --window; `allot status` gives a run one slice end and the class it began as."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from allotment.cli.render import forecast_text
from allotment.sdk import models as m
from tests.cli.conftest import Allot
from tests.sdk.live import SMALL, LiveServer, live_server, wait_for
from tests.spending import leave_remaining, spend


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The small example with 5-second slices, so a slice renews or lapses within a test."""
    folder = tmp_path_factory.mktemp("honest")
    config = folder / "allotment.yaml"
    config.write_text(SMALL.read_text("utf-8").replace("min_slice: 30m", "min_slice: 5s"), "utf-8")
    with live_server(folder / "data", config=config) as server:
        yield server


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


def gang(allot: Allot, user: str, budget: str) -> str:
    args = ["run", "--budget", budget, "--gpus", "8", "--replicas", "2", "--slice", "5s", "--grace", "1s", "--json"]
    return str(allot.json(user, *args, "--", sys.executable, "-c", "import time; time.sleep(600)")["job"]["id"])


def first_run(allot: Allot, user: str, job: str) -> dict[str, Any]:
    runs: list[dict[str, Any]] = allot.json(user, "status", job)["runs"]
    return runs[0] if runs else {}


def test_status_gives_one_slice_end_and_the_class_a_run_began_as(allot: Allot, tmp_path: Any) -> None:
    renewed = gang(allot, "ben", "pretrain")
    wait_for(lambda: first_run(allot, "ben", renewed).get("renewals", 0) >= 1, f"{renewed}'s slice renewed")
    detail = allot.json("ben", "status", renewed)
    run = detail["runs"][0]
    assert run["slice_end"] == max(s["end"] for s in detail["slices"] if s["run_id"] == run["id"])
    shown = allot("ben", "status", renewed).stdout
    assert "slice renewed until" in shown and "renewed" in shown.split("Runs", 1)[1]
    allot("ben", "cancel", renewed)
    wait_for(lambda: allot.json("ben", "status", renewed)["state"] == "cancelled", f"{renewed} to end")

    # detection can pay for one 5-second slice of 16 GPUs (0.0222 credits), not a second
    plan = tmp_path / "plan.yaml"
    period = allot.json("ada", "budget", "tree")["period"]
    plan.write_text(f"period: {period}\nbudgets:\n  - name: detection\n    allocation: 0.03\n", "utf-8")
    allot("ada", "budget", "plan", "apply", str(plan), "--why", "one slice only")
    lapsed = gang(allot, "dana", "detection")
    wait_for(lambda: first_run(allot, "dana", lapsed).get("run_class") == "opportunistic", f"{lapsed}'s slice lapsed")
    run = first_run(allot, "dana", lapsed)
    assert run["began_as"] == "guaranteed" and run["renewals"] == 0 and run["class_since"] >= run["slice_end"] - 1
    shown = allot("dana", "status", lapsed).stdout
    runs = shown.split("Runs", 1)[1].split("Charges", 1)[0]
    assert "guaranteed; opportunistic since" in runs and "not renewed" in runs
    assert "slice ended without renewal" in shown.split("Runs", 1)[0]
    assert "began guaranteed, opportunistic since" in allot("dana", "why", lapsed).stdout
    assert f"{lapsed} (dana/detection, 8 guaranteed, past its slice)" in allot("fay", "node", "list").stdout
    allot("dana", "cancel", lapsed)
    wait_for(lambda: allot.json("dana", "status", lapsed)["state"] == "cancelled", f"{lapsed} to end")


def test_charges_read_as_gpus_times_time_times_rate_with_raw_memos_only_in_json(allot: Allot) -> None:
    job = spend(allot.live, "eli", "segmentation", gpus=8, charges=3)
    detail = allot.json("eli", "status", job)
    pieces = [c for c in detail["charges"] if c["kind"] == "charge"]
    assert len(pieces) >= 3 and all("µ/h at 1000‰" in c["memo"] for c in pieces)
    (line,) = detail["charge_lines"]
    assert line["entries"] == len(pieces) and line["gpus"] == 8 and line["memo"] is None
    assert line["amount_micro"] == sum(c["amount_micro"] for c in pieces)
    assert line["seconds"] == line["end"] - line["start"] > 0
    shown = allot("eli", "status", job).stdout
    charges = shown.split("Charges", 1)[1]
    assert "8 GPUs × " in charges and "1.00 credits/GPU-h = " in charges and "µ/h" not in shown
    listed = allot("eli", "budget", "charges", "segmentation").stdout
    assert "8 GPUs × " in listed and "allocation" in listed and "µ/h" not in listed
    page = allot.json("eli", "budget", "charges", "segmentation")
    assert {c["kind"] for c in page["items"]} == {"allocation", "charge"} and page["next_cursor"] is None
    assert "may not see" in allot("ben", "budget", "charges", "segmentation", code=4).stderr


def iso(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_usage_and_budget_show_report_booked_but_unused_window_hours(allot: Allot, tmp_path: Any) -> None:
    now = int(time.time())
    tree = allot.json("ada", "budget", "tree")
    allocation = Decimal(next(b for b in tree["budgets"] if b["name"] == "finetune")["allocation_micro"]) / 1_000_000
    plan = tmp_path / "window.yaml"
    plan.write_text(
        f"period: {tree['period']}\nbudgets:\n  - name: finetune\n    allocation: {allocation}\nwindows:\n"
        f"  - id: finetune-now\n    budget: finetune\n    cluster: lab\n    gpu_type: H100\n    gpus: 8\n"
        f"    start: {iso(now - 600)}\n    end: {iso(now + 3600)}\n",
        "utf-8",
    )
    allot("ada", "budget", "plan", "apply", str(plan), "--why", "a window to watch")
    (window,) = allot.json("eli", "budget", "show", "finetune")["windows"]
    assert window["id"] == "finetune-now" and window["booked_gpu_seconds"] >= 8 * 600
    assert window["unused_gpu_seconds"] == window["booked_gpu_seconds"] - window["used_gpu_seconds"] >= 0
    text = allot("eli", "budget", "show", "finetune").stdout
    assert "finetune-now" in text and "booked" in text and "unused" in text
    report = allot.json("eli", "usage", "--budget", "finetune")
    assert [w["id"] for w in report["windows"]] == ["finetune-now"]
    assert report["windows"][0]["booked_gpu_seconds"] >= window["booked_gpu_seconds"]
    shown = allot("eli", "usage", "--budget", "finetune").stdout
    assert "booked, used and unused GPU-hours" in shown and "finetune-now" in shown
