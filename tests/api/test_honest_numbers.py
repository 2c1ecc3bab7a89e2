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


# -- a job's status: one slice end, and the class a run began as ----------------------------------------------------


def gang(api: Api, user: str, budget: str) -> str:
    """A guaranteed gang of 2 × 8 GPUs asking for 30-minute slices."""
    return api.submit(user, budget, resources={"gpus": 8, "replicas": 2}, contract={"slice": "30m"})


def set_allocation(api: Api, budget: str, credits: int) -> None:
    plan = {"period": "2026-11-01", "budgets": [{"name": budget, "allocation": credits}]}
    response = api.call("POST", "/plans/apply", "ada", {"plan": plan, "why": "tests"})
    assert response.status_code == 200, response.text


def test_a_renewed_slice_has_one_end_in_the_run_and_its_slices(api: Api) -> None:
    job = gang(api, "ben", "pretrain")
    t = api.rig.clock.now()
    api.rig.step()
    api.rig.step(t + 1800)  # the slice ends, pretrain funds another
    detail = api.call("GET", f"/jobs/{job}", "ben").json()
    (run,) = detail["runs"]
    assert [s["kind"] for s in detail["slices"]] == ["grant", "renew"]
    assert run["slice_end"] == detail["slices"][-1]["end"] == t + 3600 and run["renewals"] == 1
    assert (run["began_as"], run["run_class"], run["class_since"]) == ("guaranteed", "guaranteed", t)
    why = api.call("GET", f"/jobs/{job}/why", "ben").json()["run"]
    assert why["slice_end"] == run["slice_end"] and why["began_as"] == "guaranteed"


def test_a_guaranteed_gang_past_an_unfunded_slice_began_guaranteed(api: Api) -> None:
    set_allocation(
        api, "detection", 12
    )  # the first 30-minute slice of 16 GPUs costs 8 credits; a second cannot be paid
    job = gang(api, "dana", "detection")
    t = api.rig.clock.now()
    api.rig.step()
    api.rig.step(t + 1800)
    detail = api.call("GET", f"/jobs/{job}", "dana").json()
    (run,) = detail["runs"]
    assert [s["kind"] for s in detail["slices"]] == ["grant"] and run["renewals"] == 0
    assert run["slice_end"] == detail["slices"][0]["end"] == t + 1800
    assert (run["began_as"], run["run_class"], run["class_since"]) == ("guaranteed", "opportunistic", t + 1800)
    why = api.call("GET", f"/jobs/{job}/why", "dana").json()["run"]
    assert (why["began_as"], why["run_class"], why["class_since"]) == ("guaranteed", "opportunistic", t + 1800)
    nodes = api.call("GET", "/nodes", "fay").json()
    held = [j for n in nodes for j in n["jobs"] if j["job_id"] == job]
    assert len(held) == 2 and all(j["began_as"] == "guaranteed" and j["run_class"] == "opportunistic" for j in held)

    # its charges: one line for the guaranteed half hour, one at the opportunistic price since
    for minute in range(35, 65, 5):
        api.rig.step(t + minute * 60)
    detail = api.call("GET", f"/jobs/{job}", "dana").json()
    lines = [
        (c["gpus"], c["seconds"], c["gpu_rate_micro"], c["price"], c["amount_micro"]) for c in detail["charge_lines"]
    ]
    assert lines == [(16, 1800, 1_000_000, 1000, -8_000_000), (16, 1800, 1_000_000, 400, -3_200_000)]
    assert sum(c["amount_micro"] for c in detail["charges"]) == -11_200_000


# -- charges as lines: GPUs × time × rate = credits -------------------------------------------------------------


def test_a_runs_charges_coalesce_into_one_line_and_keep_their_memos_in_the_entries(api: Api) -> None:
    job = api.submit("ben", "pretrain", resources={"gpus": 8, "replicas": 2}, contract={"slice": "8h"})
    t = api.rig.clock.now()
    api.rig.step()
    for minute in range(5, 65, 5):  # a charge every cycle: twelve entries
        api.rig.step(t + minute * 60)
    detail = api.call("GET", f"/jobs/{job}", "ben").json()
    charges = [c for c in detail["charges"] if c["kind"] == "charge"]
    assert len(charges) == 12 and all("µ/h at 1000‰ for [" in c["memo"] for c in charges)
    (line,) = detail["charge_lines"]
    assert (line["start"], line["end"], line["gpus"], line["seconds"]) == (t, t + 3600, 16, 3600)
    assert (line["gpu_rate_micro"], line["price"], line["amount_micro"], line["entries"]) == (
        1_000_000,
        1000,
        -16_000_000,
        12,
    )
    assert line["memo"] is None and line["run_id"] == detail["runs"][0]["id"]


def test_a_budgets_charge_lines_page_through_every_entry_newest_first(api: Api) -> None:
    api.submit("ben", "pretrain", resources={"gpus": 8})
    api.submit("chen", "finetune", resources={"gpus": 8})
    t = api.rig.clock.now()
    api.rig.step()
    for minute in range(5, 35, 5):
        api.rig.step(t + minute * 60)
    whole = api.call("GET", "/dashboard/budgets/language/charge-lines", "ben").json()
    assert whole["next_cursor"] is None
    kinds = sorted((c["budget"], c["kind"], c["entries"]) for c in whole["items"])
    assert kinds == [
        ("finetune", "allocation", 1),
        ("finetune", "charge", 6),
        ("pretrain", "allocation", 1),
        ("pretrain", "charge", 6),
    ]
    assert [c["last_id"] for c in whole["items"]] == sorted((c["last_id"] for c in whole["items"]), reverse=True)
    entries = api.call("GET", "/dashboard/budgets/language/charges?limit=500", "ben").json()["items"]
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = api.call(
            "GET", "/dashboard/budgets/language/charge-lines?limit=4" + (f"&cursor={cursor}" if cursor else ""), "ben"
        ).json()
        pages += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sum(c["entries"] for c in pages) == len(entries)  # nothing skipped or repeated across pages
    assert sum(c["amount_micro"] for c in pages) == sum(e["amount_micro"] for e in entries)
    assert api.call("GET", "/dashboard/budgets/language/charge-lines", "dana").status_code == 403
    assert api.call("GET", "/dashboard/budgets/language/charge-lines?cursor=x", "ben").status_code == 400


# -- capacity windows: booked, used and unused GPU-hours (the squatting signal) ----------------------------------

WINDOW_START = 1_794_434_400  # 2026-11-11T22:00:00Z: nightly-detection-evals, 8 H100 for 8 hours


def test_a_window_reports_booked_used_and_unused_gpu_seconds_per_budget(api: Api) -> None:
    api.rig.step(WINDOW_START - 60)
    before = api.call("GET", "/budgets/detection", "dana").json()["windows"][0]
    assert (before["booked_gpu_seconds"], before["used_gpu_seconds"]) == (0, 0)  # not open yet: nothing booked
    api.submit("dana", "detection", resources={"gpus": 4})
    api.rig.step(WINDOW_START)
    api.rig.step(WINDOW_START + 7200)
    (window,) = api.call("GET", "/budgets/detection", "dana").json()["windows"]
    assert window["id"] == "nightly-detection-evals"
    booked, used = 8 * 7200, 4 * 7200  # four of its eight GPUs for two hours
    assert (window["booked_gpu_seconds"], window["used_gpu_seconds"], window["unused_gpu_seconds"]) == (
        booked, used, booked - used)  # fmt: skip
    report = api.call("GET", "/reports/usage?budget=detection", "dana").json()
    assert report["windows"] == [window]
    everyone = api.call("GET", "/reports/usage", "ada").json()["windows"]
    assert [w["id"] for w in everyone] == ["nightly-detection-evals"]
    assert api.call("GET", "/reports/usage", "ben").json()["windows"] == []  # not ben's budget
