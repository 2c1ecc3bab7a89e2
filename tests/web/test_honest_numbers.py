"""Honest numbers (issue 23) in the dashboard, in Debian's Chromium against a live server: every budget's "runs out"
is the one forecast (decision 57) — a time before the period end, "exhausted", or "lasts the period" — the same as
the API's."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.spending import leave_remaining, spend
from tests.web.conftest import Dashboard


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
