"""Honest numbers (issue 23) in the dashboard, in Debian's Chromium against a live server whose policy allows
5-second slices: every budget's "runs out" is the one forecast (decision 57) — a time before the period end,
"exhausted", or "lasts the period" — the same as the API's; a job's runs show the class they began as."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from playwright.sync_api import expect

from tests.sdk.live import SMALL, LiveServer, live_server, wait_for
from tests.spending import leave_remaining, spend
from tests.web.conftest import Dashboard


def iso(t: int) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("honest-web")
    config = folder / "allotment.yaml"
    config.write_text(SMALL.read_text("utf-8").replace("min_slice: 30m", "min_slice: 5s"), "utf-8")
    with live_server(folder / "data", config=config) as server:
        yield server


def test_runs_out_is_the_one_forecast_and_never_past_the_period_end(dashboard: Dashboard) -> None:
    live = dashboard.live
    spend(live, "dana", "detection")
    spent = dashboard.api("dana", "GET", "/budgets/detection").json()["forecast"]["spent_micro"]
    leave_remaining(live, "detection", spent // 2)
    ahead = dashboard.api("dana", "GET", "/budgets/detection").json()["forecast"]
    assert ahead["outcome"] == "runs_out"

    page = dashboard.login("eli", "/budgets")
    detection = page.locator("tr[data-budget='detection'] td.runs-out")
    expect(detection).to_have_attribute("data-outcome", "runs_out")
    shown = int(detection.get_attribute("data-runs-out-at") or "0")
    assert abs(shown - ahead["runs_out_at"]) < 120  # the same forecast, read a few seconds later
    expect(detection).to_contain_text("(in 1")  # about 12 hours away, as a time before the period end
    expect(page.locator("tr[data-budget='segmentation'] td.runs-out")).to_have_text("lasts the period")
    end = ahead["period_end"]
    for cell in page.locator("td.runs-out").all():
        at = cell.get_attribute("data-runs-out-at")
        assert not at or int(at) < end, "a run-out date past the period end"

    dashboard.open("/budgets/detection")
    figure = page.locator("#fig-exhausts .big")
    expect(figure).to_have_attribute("data-outcome", "runs_out")
    expect(page.locator("#burndown")).to_have_attribute("data-outcome", "runs_out")
    expect(page.locator("#burndown circle.exhaust")).to_have_count(1)
    dashboard.open("/budgets/segmentation")
    expect(page.locator("#fig-exhausts .big")).to_have_text("lasts the period")
    expect(page.locator("#burndown circle.exhaust")).to_have_count(0)


def test_a_run_past_an_unrenewed_slice_shows_it_began_guaranteed(dashboard: Dashboard) -> None:
    leave_remaining(dashboard.live, "finetune", 15_000)  # one 5-second slice of 8 GPUs costs 11,111 µcredits
    command = [sys.executable, "-c", "import time; time.sleep(600)"]
    job = dashboard.submit("eli", "finetune", command=command, resources={"gpus": 8}, contract={"slice": "5s"})

    def lapsed() -> bool:
        runs = dashboard.api("eli", "GET", f"/jobs/{job}").json()["runs"]
        return bool(runs) and runs[0]["run_class"] == "opportunistic"

    wait_for(lapsed, f"{job}'s slice to lapse")
    page = dashboard.login("eli", f"/jobs/{job}")
    cell = page.locator("td.run-class").first
    expect(cell).to_have_attribute("data-began-as", "guaranteed")
    expect(cell).to_contain_text("guaranteed; opportunistic since")
    expect(page.locator("td.slice-end").first).to_contain_text("not renewed")
    dashboard.api("eli", "POST", f"/jobs/{job}/cancel")


def test_charges_read_as_gpus_times_time_times_rate(dashboard: Dashboard) -> None:
    job = spend(dashboard.live, "ben", "pretrain", gpus=8, charges=3)
    page = dashboard.login("ben", "/budgets/pretrain")
    line = page.locator("#charges tr.charge-line[data-kind='charge']")
    expect(line).to_have_count(1)
    expect(line).to_contain_text(job)
    expect(line.locator("td.formula")).to_contain_text("8 GPUs × ")
    entries = int(line.get_attribute("data-entries") or "0")
    assert entries >= 3
    expect(page.locator("#charges")).not_to_contain_text("µ/h")
    dashboard.open(f"/jobs/{job}")
    expect(page.locator("#job-charges td.formula")).to_contain_text("credits/GPU-h = ")
    expect(page.locator("#job")).not_to_contain_text("µ/h")


def test_a_budget_page_shows_booked_used_and_unused_window_hours(dashboard: Dashboard) -> None:
    now = int(time.time())
    tree = dashboard.api("ada", "GET", "/budgets").json()
    allocation = Decimal(next(b for b in tree["budgets"] if b["name"] == "pretrain")["allocation_micro"]) / 1_000_000
    plan = {
        "period": tree["period"],
        "budgets": [{"name": "pretrain", "allocation": str(allocation)}],
        "windows": [{"id": "pretrain-now", "budget": "pretrain", "cluster": "lab", "gpu_type": "H100", "gpus": 8,
                     "start": iso(now - 900), "end": iso(now + 3600)}],
    }  # fmt: skip
    applied = dashboard.api("ada", "POST", "/plans/apply", {"plan": plan, "why": "a window to watch"})
    assert applied.status_code == 200, applied.text
    page = dashboard.login("ben", "/budgets/pretrain")
    row = page.locator("tr.window[data-window='pretrain-now']")
    expect(row).to_have_count(1)
    window = dashboard.api("ben", "GET", "/budgets/pretrain").json()["windows"][0]
    assert window["booked_gpu_seconds"] >= 8 * 900
    unused = int(row.get_attribute("data-unused") or "-1")
    assert 0 <= unused <= window["unused_gpu_seconds"] + 8 * 60  # read moments apart while the window is open
    expect(row.locator("td.unused")).not_to_have_text("")
