"""A job's page: its state history as a timeline, runs and slices, charges and output; visible to its budget's
members, refused to others."""

from __future__ import annotations

import sys

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


def test_a_gangs_output_is_labelled_and_one_replica_can_be_chosen(dashboard: Dashboard) -> None:
    code = "import os; r = os.environ['ALLOT_REPLICA']; print(f'hello from replica {r}', flush=True)"
    job = dashboard.submit(
        "dana", "detection", command=[sys.executable, "-c", code], resources={"gpus": 8, "replicas": 2}
    )
    wait_for(lambda: dashboard.api("dana", "GET", f"/jobs/{job}").json()["state"] == "completed", f"{job} done")

    page = dashboard.login("dana", f"/jobs/{job}")
    logs = page.locator("#logs")
    expect(logs).to_contain_text("0: hello from replica 0")
    expect(logs).to_contain_text("1: hello from replica 1")
    page.locator("#logs-replica").select_option("1")
    expect(logs).to_have_text("hello from replica 1\n")
