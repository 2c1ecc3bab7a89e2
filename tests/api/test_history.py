"""`GET /jobs/history` (sacct): finished jobs that ended in a range, newest end first, with elapsed time, GPU-seconds,
net credits and exit code; filtered by user, budget and state, limited to the jobs the caller may see, page by
page."""

from __future__ import annotations

from typing import Any

import pytest

from allotment.executors.simulated import Outcome
from tests.api.conftest import Api


def finished(api: Api) -> dict[str, str]:
    """Three jobs that end at known times: ok (ben, 2 GPUs, 600 s, exit 0), bad (chen, 1 GPU, 300 s, exit 3) and
    gone (eli, cancelled before it ran). Returns their ids by name."""
    ids = {
        "ok": api.submit("ben", "pretrain", name="ok", resources={"gpus": 2}),
        "bad": api.submit("chen", "pretrain", name="bad", resources={"gpus": 1}),
        "gone": api.submit("eli", "segmentation", name="gone", resources={"gpus": 1}),
    }
    api.rig.outcomes[ids["ok"]] = Outcome(duration=600)
    api.rig.outcomes[ids["bad"]] = Outcome(duration=300, exit_code=3)
    assert api.call("POST", f"/jobs/{ids['gone']}/cancel", "eli").status_code == 200
    t = api.rig.clock.now()
    for at in (t, t + 300, t + 600):
        api.rig.step(at)
    api.rig.step(t + 601)
    return ids


def test_history_totals_each_finished_job(api: Api) -> None:
    ids = finished(api)
    t = api.rig.clock.now()
    body = api.call("GET", "/jobs/history", "ada").json()
    assert body["until"] == t and body["since"] == t - 86400
    rows = {h["name"]: h for h in body["items"]}
    assert [h["name"] for h in body["items"]] == ["ok", "bad", "gone"]  # newest end first
    ok, bad, gone = rows["ok"], rows["bad"], rows["gone"]
    assert ok["id"] == ids["ok"] and ok["state"] == "completed" and ok["exit_code"] == 0
    assert ok["elapsed"] == 600 and ok["gpu_seconds"] == 1200 and ok["attempts"] == 1
    assert ok["charged_micro"] == 1200 * 1_000_000 // 3600  # 2 H100 for 10 min at 1 credit per GPU-hour
    assert bad["state"] == "failed" and bad["exit_code"] == 3 and bad["gpu_seconds"] == 300
    assert gone["state"] == "cancelled" and gone["attempts"] == 0 and gone["started_at"] is None
    assert gone["exit_code"] is None and gone["charged_micro"] == 0 and gone["elapsed"] == 0


ALL = ["ok", "bad", "gone"]


@pytest.mark.parametrize(
    ("user", "query", "names"),
    [
        pytest.param("ada", {}, ALL, id="admin-sees-all"),
        pytest.param("ben", {}, ["ok", "bad"], id="lead-sees-own-subtree"),
        pytest.param("chen", {}, ["ok", "bad"], id="member-sees-own-budget"),
        pytest.param("eli", {}, ["gone"], id="member-elsewhere-sees-only-visible"),
        pytest.param("ada", {"user": "chen"}, ["bad"], id="by-user"),
        pytest.param("ada", {"budget": "segmentation"}, ["gone"], id="by-budget"),
        pytest.param("ada", {"state": ["failed", "cancelled"]}, ["bad", "gone"], id="by-states"),
        pytest.param("ada", {"since": "bad-end+1"}, ["ok"], id="since-cuts-earlier-ends"),
        pytest.param("ada", {"since": "bad-end"}, ["ok", "bad"], id="since-is-inclusive"),
        pytest.param("ada", {"until": "bad-end"}, ["gone"], id="until-is-exclusive"),
    ],
)
def test_history_filters_and_visibility(api: Api, user: str, query: dict[str, Any], names: list[str]) -> None:
    finished(api)
    ends = {h["name"]: h["ended_at"] for h in api.call("GET", "/jobs/history", "ada").json()["items"]}
    marks = {"bad-end": ends["bad"], "bad-end+1": ends["bad"] + 1}
    params = {k: marks.get(v, v) if isinstance(v, str) else v for k, v in query.items()}
    body = api.call("GET", "/jobs/history", user, params=params)
    assert body.status_code == 200, body.text
    assert [h["name"] for h in body.json()["items"]] == names


def test_history_pages_and_refuses_bad_ranges_and_states(api: Api) -> None:
    finished(api)
    seen, cursor = [], None
    while True:
        page = api.call("GET", "/jobs/history", "ada", params={"limit": 1, **({"cursor": cursor} if cursor else {})})
        seen += [h["name"] for h in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == ALL
    bad_state = api.call("GET", "/jobs/history?state=running", "ada")
    assert bad_state.status_code == 422 and bad_state.json()["problems"][0]["field"] == "state"
    backwards = api.call("GET", "/jobs/history?since=200&until=100", "ada")
    assert backwards.status_code == 422 and backwards.json()["problems"][0]["field"] == "since"
    assert api.call("GET", "/jobs/history?cursor=bm9wZQ", "ada").status_code == 400
    assert api.call("GET", "/jobs/history", None).status_code == 401
