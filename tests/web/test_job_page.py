"""A job's page: its state history as a timeline, runs and slices, charges and output; visible to its budget's
members, refused to others."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.sdk.live import wait_for
from tests.web.conftest import Dashboard


def test_a_finished_jobs_page_shows_its_timeline_runs_charges_and_output(dashboard: Dashboard) -> None:
    job = dashboard.submit("dana", "detection", command=["echo", "hello from the dashboard"], resources={"gpus": 1})
    wait_for(lambda: dashboard.api("dana", "GET", f"/jobs/{job}").json()["state"] == "completed", f"{job} done")
    detail = dashboard.api("dana", "GET", f"/jobs/{job}").json()

    page = dashboard.login("eli", f"/jobs/{job}")  # eli is a member of detection
    expect(page.locator("#job")).to_have_attribute("data-state", "completed")
    expect(page.locator("#logs")).to_contain_text("hello from the dashboard")
    timeline = page.locator("#timeline")
    expect(timeline).to_have_attribute("data-events", str(len(detail["history"])))
    states = [g.get_attribute("data-state") for g in timeline.locator("g.seg").all()]
    assert states == [e["to_state"] for e in detail["history"]]
    assert states[0] == "pending" and states[-1] == "completed"
    expect(page.locator("#job")).to_contain_text(detail["runs"][0]["placement"][0]["node"])
    expect(page.locator("#cancel-job")).to_have_count(0)


def test_a_member_of_another_budget_is_refused_a_jobs_page(dashboard: Dashboard) -> None:
    job = dashboard.submit("dana", "detection", command=["true"], resources={"gpus": 1})
    page = dashboard.login("chen", f"/jobs/{job}")
    expect(page.locator("#page-error")).to_contain_text("may not see job")
