"""Why a job waits (the reason the engine wrote, with the budget's standing) and its logs, followed by offset."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from allotment.config import to_core
from allotment.core.cycle import AllotmentPolicy
from allotment.engine.cycle import Engine
from allotment.executors.local import LocalExecutor
from tests.api.conftest import Api


def test_why_returns_the_reason_the_engine_wrote_with_the_budget_standing(api: Api) -> None:
    jobs = [api.submit("ben", "pretrain", resources={"gpus": 8}) for _ in range(4)]
    before = api.call("GET", f"/jobs/{jobs[3]}/why", "ben").json()
    assert before["blocker"] is None and before["explained_at"] is None
    t = api.rig.clock.now()
    api.rig.step()
    (waiting,) = api.call("GET", "/jobs?state=pending", "ben").json()["items"]
    running = [j for j in jobs if j != waiting["id"]]
    why = api.call("GET", f"/jobs/{waiting['id']}/why", "chen")
    assert why.status_code == 200, why.text
    body = why.json()
    assert body["blocker"] == "limit" and "24" in body["message"] and body["explained_at"] == t
    assert body["needed_gpus"] == 8
    standing = body["standing"]
    assert standing["budget"] == "pretrain" and standing["allocation_micro"] == 8_000_000_000
    # three 8-GPU jobs hold one-hour slices: 24 GPU-hours are committed
    assert standing["committed_micro"] == 24_000_000
    assert standing["balance_micro"] == 8_000_000_000
    assert standing["available_micro"] == 8_000_000_000 - 24_000_000
    api.rig.step(t + 360)
    later = api.call("GET", f"/jobs/{waiting['id']}/why", "ben").json()["standing"]
    assert later["balance_micro"] == 8_000_000_000 - 24 * 360 * 1_000_000 // 3600
    started = api.call("GET", f"/jobs/{running[0]}/why", "ben")
    assert started.status_code == 200 and started.json()["run"]["slice_end"] == t + 3600


def test_logs_follow_the_output_of_a_real_process_by_offset(api: Api, tmp_path: Path) -> None:
    nodes = [n.name for n in to_core(api.rig.cfg).nodes]
    rig = api.rig
    rig.engine = Engine(rig.store, LocalExecutor(tmp_path / "executor", nodes), rig.clock, AllotmentPolicy())
    script = "import sys\nfor i in range(5): print(f'step {i} loss 0.{9 - i} ✓')\nsys.stdout.flush()"
    job = api.submit("ben", "pretrain", command=[sys.executable, "-c", script], resources={"gpus": 1})
    empty = api.call("GET", f"/jobs/{job}/logs", "ben").json()
    assert empty == {
        "job_id": job,
        "attempt": None,
        "replica": None,
        "offset": 0,
        "next_offset": 0,
        "data": "",
        "complete": False,
    }
    deadline = time.monotonic() + 60
    while api.call("GET", f"/jobs/{job}", "ben").json()["state"] != "completed":
        assert time.monotonic() < deadline, "the job did not finish"
        rig.step(rig.clock.now() + 1)
        time.sleep(0.1)
    text, offset, chunks = "", 0, 0
    while True:
        chunk = api.call("GET", f"/jobs/{job}/logs?offset={offset}&limit=7", "chen").json()
        text += chunk["data"]
        offset, chunks = chunk["next_offset"], chunks + 1
        if chunk["complete"]:
            break
        assert chunks < 100
    assert text.splitlines() == [f"step {i} loss 0.{9 - i} ✓" for i in range(5)]
    assert chunks > 5 and chunk["attempt"] == 0
    assert "✓" in text and "\ufffd" not in text  # chunks never split a character
    tail = api.call("GET", f"/jobs/{job}/logs?offset={offset}", "ben").json()
    assert tail["data"] == "" and tail["complete"] is True
    assert api.call("GET", f"/jobs/{job}/logs?attempt=3", "ben").status_code == 404
    assert api.call("GET", f"/jobs/{job}/logs", "eli").status_code == 403


@pytest.mark.parametrize(
    ("spec", "preemptible_now", "in_message", "by"),
    [
        pytest.param({}, False, "in its guaranteed slice until", "fair-share", id="guaranteed-in-its-slice"),
        pytest.param(
            {"contract": {"class": "opportunistic"}}, True, "opportunistic", "for-guaranteed", id="opportunistic"
        ),
    ],
)
def test_why_explains_a_running_job_what_could_preempt_it_and_when(
    api: Api, spec: dict[str, object], preemptible_now: bool, in_message: str, by: str
) -> None:
    job = api.submit("ben", "pretrain", name="runner", resources={"gpus": 2}, grace="2m", **spec)
    t = api.rig.clock.now()
    api.rig.step()
    why = api.call("GET", f"/jobs/{job}/why", "ben")
    assert why.status_code == 200, why.text
    body = why.json()
    run = body["run"]
    assert body["state"] == "running" and body["name"] == "runner" and in_message in body["message"]
    assert run["preemptible_now"] is preemptible_now and by in run["preemptible_by"]
    assert run["notice"] == 120  # the job's grace
    assert run["started_at"] == t and run["run_class"] == spec.get("contract", {"class": "guaranteed"})["class"]  # type: ignore[index]
    if preemptible_now:
        assert run["preemptible_from"] is None
    else:
        assert run["preemptible_from"] == run["slice_end"] == t + 3600 and "120s notice" in body["message"]


def test_why_finds_a_job_by_its_name_preferring_the_live_one(api: Api) -> None:
    first = api.submit("ben", "pretrain", name="sweep", resources={"gpus": 1})
    assert api.call("GET", "/jobs/sweep/why", "ben").json()["job_id"] == first
    assert api.call("POST", f"/jobs/{first}/cancel", "ben").status_code == 200
    api.rig.step()
    # the finished job still answers to its name while it is the only one
    assert api.call("GET", "/jobs/sweep/why", "ben").status_code == 404
    second = api.submit("ben", "pretrain", name="sweep", resources={"gpus": 1})
    assert api.call("GET", "/jobs/sweep/why", "ben").json()["job_id"] == second  # the live one wins
    third = api.submit("chen", "pretrain", name="sweep", resources={"gpus": 1})
    ambiguous = api.call("GET", "/jobs/sweep/why", "ben")
    assert ambiguous.status_code == 409, ambiguous.text
    body = ambiguous.json()
    assert second in body["message"] and third in body["message"] and first not in body["message"]
    assert body["problems"][0]["field"] == "job"
    # eli sees neither budget's jobs: for eli the name does not exist
    assert api.call("GET", "/jobs/sweep/why", "eli").status_code == 404
    assert "no job with the id or name" in api.call("GET", "/jobs/nothing/why", "ben").json()["message"]
