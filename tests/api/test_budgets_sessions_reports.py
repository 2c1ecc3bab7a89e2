"""Budgets (tree, burn, members), sessions (request, attach information, release) and the usage report."""

from __future__ import annotations

from tests.api.conftest import Api


def test_the_tree_rolls_up_spending_and_show_forecasts_the_run_out(api: Api) -> None:
    t = api.rig.clock.now()
    job = api.submit("chen", "finetune", resources={"gpus": 8})
    api.rig.step()
    api.rig.step(t + 3600)  # one slice: 8 GPU-hours charged
    tree = api.call("GET", "/budgets", "eli").json()
    assert tree["period"] == "2026-11-01"
    names = [b["name"] for b in tree["budgets"]]
    assert names == ["lab", "language", "finetune", "pretrain", "vision", "detection", "segmentation"]
    by = {b["name"]: b for b in tree["budgets"]}
    assert by["finetune"]["used_micro"] == by["language"]["used_micro"] == by["lab"]["used_micro"] == 8_000_000
    assert by["finetune"]["remaining_micro"] == 5_000_000_000 - 8_000_000
    assert by["lab"]["remaining_micro"] == 23_000_000_000 - 8_000_000 and by["lab"]["depth"] == 0
    assert by["finetune"]["leaf"] and not by["language"]["leaf"]
    sub = api.call("GET", "/budgets?root=vision", "eli").json()["budgets"]
    assert [b["name"] for b in sub] == ["vision", "detection", "segmentation"]
    shown = api.call("GET", "/budgets/finetune", "eli").json()
    assert shown["forecast"]["spent_micro"] == 8_000_000 and shown["forecast"]["per_hour_micro"] == 8_000_000 // 24
    # 4,992 credits left at 8 credits a day outlive the period (tests/api/test_honest_numbers.py has the rest)
    assert shown["forecast"]["outcome"] == "lasts_period" and shown["forecast"]["runs_out_at"] is None
    assert {m["user"] for m in shown["members"]} == {"chen", "eli"}
    detection = api.call("GET", "/budgets/detection", "eli").json()
    assert detection["windows"][0]["id"] == "nightly-detection-evals"
    assert api.call("GET", "/budgets/vision", "eli").json()["children"] == ["detection", "segmentation"]
    assert api.call("GET", "/budgets/nope", "eli").status_code == 404
    assert api.call("GET", f"/jobs/{job}", "chen").json()["charged_micro"] == 8_000_000


def test_a_session_is_requested_reports_how_to_attach_and_is_released(api: Api) -> None:
    response = api.call("POST", "/sessions", "eli", {"budget": "segmentation", "gpus": 2, "length": "2h"})
    assert response.status_code == 201, response.text
    session = response.json()
    job = session["job"]["id"]
    assert session["job"]["kind"] == "session" and session["ready"] is False and session["attach"] == []
    api.rig.step()
    ready = api.call("GET", f"/sessions/{job}", "eli").json()
    assert ready["ready"] is True and ready["ends_at"] == api.rig.clock.now() + 7200
    (attach,) = ready["attach"]
    assert len(attach["gpus"]) == 2 and attach["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, attach["gpus"]))
    assert attach["command"][0] == "env" and attach["env"]["ALLOT_JOB_ID"] == job
    too_big = api.call("POST", "/sessions", "eli", {"budget": "segmentation", "gpus": 16})
    assert too_big.status_code == 422 and too_big.json()["problems"][0]["field"] == "resources.gpus"
    batch = api.submit("eli", "segmentation")
    assert api.call("GET", f"/sessions/{batch}", "eli").status_code == 404
    released = api.call("DELETE", f"/sessions/{job}", "eli")
    assert released.status_code == 200 and released.json()["cancel_requested_at"] is not None
    api.rig.step(api.rig.clock.now() + 10)
    api.rig.step(api.rig.clock.now() + 40)
    assert api.call("GET", f"/sessions/{job}", "eli").json()["job"]["state"] == "cancelled"


def test_usage_is_reported_by_budget_period_and_gpu_type(api: Api) -> None:
    t = api.rig.clock.now()
    api.submit("chen", "finetune", resources={"gpus": 8})
    api.submit("eli", "segmentation", resources={"gpus": 4})
    api.rig.step()
    api.rig.step(t + 1800)
    report = api.call("GET", "/reports/usage", "ada").json()
    rows = {(r["budget"], r["gpu_type"]): r for r in report["rows"]}
    assert report["periods"] == ["2026-11-01"]
    assert rows[("finetune", "H100")]["gpu_seconds"] == 8 * 1800
    assert rows[("segmentation", "H100")]["gpu_seconds"] == 4 * 1800
    assert (
        rows[("finetune", "H100")]["charged_micro"] == 4_000_000
        and rows[("finetune", "H100")]["net_micro"] == 4_000_000
    )
    mine = api.call("GET", "/reports/usage", "chen").json()["rows"]
    assert {r["budget"] for r in mine} == {"finetune"}  # chen sees the budgets they belong to
    led = api.call("GET", "/reports/usage?budget=vision", "dana").json()["rows"]
    assert {r["budget"] for r in led} == {"segmentation"}
    assert api.call("GET", "/reports/usage?period=2026-10-01", "ada").status_code == 404
