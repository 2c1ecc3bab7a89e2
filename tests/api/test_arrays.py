"""Job arrays (sbatch --array; `array:` in a spec): one POST creates every task in one transaction and a retry with
its request id creates nothing twice, a bad expression is refused at the edge with the reason, `%N` keeps at most N
tasks running across engine cycles (the others wait with a reason naming the limit), and cancel, hold and release
act on every unfinished task of the array (POST /arrays/{id}/…) or on one task through its own id."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from allotment.core.jobstate import FINAL
from allotment.executors.simulated import Outcome
from allotment.store.tables import AuditRow, JobEventRow, JobRow
from tests.api.conftest import Api


def submit_array(api: Api, array: str, *, user: str = "chen", request_id: str | None = None, **spec: Any) -> Any:
    body: dict[str, Any] = {"spec": {"budget": "pretrain", "command": ["train"], "array": array, **spec}}
    if request_id is not None:
        body["request_id"] = request_id
    return api.call("POST", "/jobs", user, body)


def created(api: Api, array: str, **spec: Any) -> str:
    response = submit_array(api, array, **spec)
    assert response.status_code == 201, response.text
    return str(response.json()["array"]["id"])


def tasks(api: Api, array_id: str) -> dict[int, str]:
    """index → state of every task, from the database."""
    with api.ctx.sessions() as session:
        rows = session.execute(select(JobRow.array_index, JobRow.state).where(JobRow.array_id == array_id))
        return {index: state for index, state in rows if index is not None}


def view(api: Api, array_id: str, caller: str = "chen") -> dict[str, Any]:
    response = api.call("GET", f"/arrays/{array_id}", caller)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def job_rows(api: Api) -> int:
    with api.ctx.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(JobRow)) or 0)


def step(api: Api, seconds: int = 1) -> None:
    api.rig.step(api.rig.clock.now() + seconds)


def test_one_request_creates_every_task_as_a_job(api: Api) -> None:
    response = submit_array(api, "1,3,5-9:2%4", resources={"gpus": 1}, name="sweep")
    assert response.status_code == 201, response.text
    body = response.json()
    array = body["array"]
    assert (array["expression"], array["tasks"], array["limit"]) == ("1,3,5,7,9%4", 5, 4)
    aid = array["id"]
    assert body["job"]["id"] == f"{aid}_1" and body["job"]["array_index"] == 1 and body["job"]["array_id"] == aid
    assert tasks(api, aid) == dict.fromkeys((1, 3, 5, 7, 9), "pending")
    with api.ctx.sessions() as session:
        events = session.scalar(select(func.count()).select_from(JobEventRow).where(JobEventRow.job_id.like(aid + "%")))
    assert events == 5  # each task has its first history record
    task = api.call("GET", f"/jobs/{aid}_7", "chen").json()  # a task is a job, read like one
    assert (task["name"], task["gpus"], task["array_index"]) == ("sweep", 1, 7)
    assert view(api, aid)["counts"] == {"pending": 5}


def test_a_refused_array_writes_nothing(api: Api) -> None:
    before = job_rows(api)
    response = submit_array(api, "0-99", budget="no-such-budget")
    assert response.status_code == 422 and "unknown budget" in response.text
    assert job_rows(api) == before


def test_a_retry_with_the_request_id_creates_nothing_twice(api: Api) -> None:
    first = submit_array(api, "0-49%5", request_id="sweep-1")
    assert first.status_code == 201
    before = job_rows(api)
    again = submit_array(api, "0-49%5", request_id="sweep-1")
    assert again.status_code == 200, again.text
    assert again.json()["created"] is False
    assert again.json()["array"] == first.json()["array"] and again.json()["job"]["id"] == first.json()["job"]["id"]
    assert job_rows(api) == before
    other = api.call("POST", "/jobs", "chen", {"spec": {"budget": "pretrain", "command": ["train"]},
                                               "request_id": "sweep-1"})  # fmt: skip
    assert other.status_code == 409 and "another submission" in other.text
    assert job_rows(api) == before


BAD = [
    pytest.param("5-3", "ends before it starts", id="range-backwards"),
    pytest.param("0-10000", "at most 10000 tasks", id="too-many-tasks"),
    pytest.param("1,1", "index 1 is named twice", id="index-twice"),
    pytest.param("0-9%0", "1 or more", id="limit-zero"),
    pytest.param("0-9%x", "1 or more", id="limit-not-a-number"),
    pytest.param("a-b", "is not an index", id="not-an-index"),
    pytest.param("0-9:0", "step must be 1 or more", id="step-zero"),
    pytest.param("1000000", "at most 999999", id="index-too-large"),
    pytest.param("", "give the task indices", id="empty"),
    pytest.param("-1", "is not an index", id="negative"),
    pytest.param("0-" + "9" * 2000, "at most 1000 characters", id="expression-too-long"),
]


@pytest.mark.parametrize(("array", "reason"), BAD)
def test_a_bad_expression_is_refused_with_its_reason(api: Api, array: str, reason: str) -> None:
    before = job_rows(api)
    response = submit_array(api, array)
    assert response.status_code == 422, response.text
    problems = response.json()["problems"]
    assert any(p["field"] == "array" and reason in p["reason"] for p in problems), problems
    assert job_rows(api) == before


def test_a_session_is_not_an_array(api: Api) -> None:
    response = submit_array(api, "0-3", kind="session", resources={"gpus": 1})
    assert response.status_code == 422 and "a session cannot be a job array" in response.text


def test_the_largest_array_is_accepted_whole(api: Api) -> None:
    response = submit_array(api, "0-9999%50", resources={"gpus": 1})
    assert response.status_code == 201, response.text
    aid = response.json()["array"]["id"]
    assert response.json()["array"]["tasks"] == 10_000
    assert view(api, aid)["indices"] == {"pending": "0-9999"}


def test_the_limit_keeps_at_most_n_running_across_cycles(api: Api) -> None:
    aid = created(api, "0-6%2", resources={"gpus": 1})
    for i in range(7):
        api.rig.outcomes[f"{aid}_{i}"] = Outcome(duration=60)
    started: list[int] = []
    for _ in range(12):  # 32 free GPUs, so only the limit holds tasks back; each task runs 60 s
        step(api, 31)
        states = tasks(api, aid)
        running = sorted(i for i, s in states.items() if s == "running")
        assert len(running) <= 2, states
        started += [i for i in running if i not in started]
        waiting = [i for i, s in states.items() if s == "pending"]
        if waiting:
            why = api.call("GET", f"/jobs/{aid}_{waiting[-1]}/why", "chen").json()
            assert why["blocker"] == "array-limit" and "%2" in why["message"] and aid in why["message"]
    assert set(tasks(api, aid).values()) == {"completed"}
    assert started == list(range(7))  # by index, two at a time


def test_a_plain_job_beside_a_limited_array_is_not_held_back(api: Api) -> None:
    aid = created(api, "0-9%1", resources={"gpus": 1})
    job = api.submit("chen", "pretrain", resources={"gpus": 1})
    step(api)
    assert sorted(tasks(api, aid).values()).count("running") == 1
    assert api.call("GET", f"/jobs/{job}", "chen").json()["state"] == "running"


def test_hold_release_and_cancel_act_on_every_unfinished_task(api: Api) -> None:
    aid = created(api, "0-4%2", resources={"gpus": 1})
    step(api)
    assert view(api, aid)["indices"] == {"pending": "2-4", "running": "0-1"}
    held = api.call("POST", f"/arrays/{aid}/hold", "chen")
    assert held.status_code == 200, held.text
    assert held.json()["changed"] == 3 and held.json()["array"]["indices"]["held"] == "2-4"
    api.call("POST", f"/jobs/{aid}_4/cancel", "chen")  # a task alone, by its own id
    step(api)
    assert tasks(api, aid) == {0: "running", 1: "running", 2: "pending", 3: "pending", 4: "cancelled"}
    why = api.call("GET", f"/jobs/{aid}_2/why", "chen").json()
    assert why["blocker"] == "held"
    released = api.call("POST", f"/arrays/{aid}/release", "chen").json()
    assert released["changed"] == 2 and "held" not in released["array"]["counts"]
    step(api)
    assert tasks(api, aid)[2] == "pending"  # the limit holds it now, not the hold
    assert api.call("GET", f"/jobs/{aid}_2/why", "chen").json()["blocker"] == "array-limit"
    cancelled = api.call("POST", f"/arrays/{aid}/cancel", "chen").json()
    assert cancelled["changed"] == 4  # the finished task is not asked again
    step(api)
    step(api, 600)  # running tasks leave within their grace
    assert set(tasks(api, aid).values()) <= {s.value for s in FINAL} and "pending" not in tasks(api, aid).values()
    with api.ctx.sessions() as session:
        actions = list(session.scalars(select(AuditRow.action).where(AuditRow.target == aid).order_by(AuditRow.id)))
    assert actions == ["arrays.hold", "arrays.release", "arrays.cancel"]


def test_hold_and_release_of_one_task(api: Api) -> None:
    aid = created(api, "0-3%4", resources={"gpus": 1})
    assert api.call("POST", f"/jobs/{aid}_3/hold", "chen").json()["hold"] == "user"
    step(api)
    assert tasks(api, aid) == {0: "running", 1: "running", 2: "running", 3: "pending"}
    assert view(api, aid)["counts"] == {"pending": 1, "running": 3, "held": 1}
    api.call("POST", f"/jobs/{aid}_3/release", "chen")
    step(api)
    assert set(tasks(api, aid).values()) == {"running"}


ACCESS = [
    # (caller, action, status)
    pytest.param("ben", "hold", 200, id="lead-of-the-subtree-holds"),
    pytest.param("eli", "hold", 403, id="outsider-may-not-hold"),
    pytest.param("eli", "cancel", 403, id="outsider-may-not-cancel"),
    pytest.param("chen", "no-such-array", 404, id="unknown-array"),
]


@pytest.mark.parametrize(("caller", "action", "status"), ACCESS)
def test_who_may_act_on_an_array(api: Api, caller: str, action: str, status: int) -> None:
    aid = created(api, "0-2")
    path = "/arrays/a-0000000000/hold" if action == "no-such-array" else f"/arrays/{aid}/{action}"
    response = api.call("POST", path, caller)
    assert response.status_code == status, response.text


def test_an_admin_hold_on_an_array_is_released_by_an_administrator_only(api: Api) -> None:
    aid = created(api, "0-2")
    assert api.call("POST", f"/arrays/{aid}/hold", "ada").json()["changed"] == 3
    refused = api.call("POST", f"/arrays/{aid}/release", "chen")
    assert refused.status_code == 403 and "admin hold" in refused.text
    assert view(api, aid)["counts"]["held"] == 3
    assert api.call("POST", f"/arrays/{aid}/release", "ada").json()["changed"] == 3
