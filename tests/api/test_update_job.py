"""Updating a pending job (PATCH /jobs/{id}, scontrol update job): each field passes exactly the checks a submission
passes (a refused update changes nothing), only a pending job is updated, the answer and the audit record say each
field's before and after, and the engine schedules the job as updated in its next cycle."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from allotment.store.tables import AuditRow, JobRow
from tests.api.conftest import Api


def update(api: Api, caller: str, job: str, **fields: Any) -> Any:
    return api.call("PATCH", f"/jobs/{job}", caller, fields)


def detail(api: Api, job: str) -> dict[str, Any]:
    body: dict[str, Any] = api.call("GET", f"/jobs/{job}", "ada").json()
    return body


def audits(api: Api, job: str) -> list[tuple[str, str, dict[str, Any]]]:
    with api.ctx.sessions() as session:
        rows = session.scalars(select(AuditRow).where(AuditRow.target == job).order_by(AuditRow.id))
        return [(r.action, r.actor, r.detail) for r in rows]


def revision(api: Api, job: str) -> int:
    with api.ctx.sessions() as session:
        return int(session.get(JobRow, job).revision)  # type: ignore[union-attr]


ACCEPTED = [
    # (fields asked, the job detail's field, its value after) on chen's pending 1 × 8 GPU pretrain job
    pytest.param({"priority": 7}, "priority", 7, id="priority"),
    pytest.param({"priority": -1000}, "priority", -1000, id="priority-at-its-lower-bound"),
    pytest.param({"gpus": 4}, "gpus", 4, id="gpus"),
    pytest.param({"replicas": 4}, "replicas", 4, id="replicas-four-whole-nodes"),
    pytest.param({"slice": "2h"}, "slice_seconds", 7200, id="slice-as-a-duration"),
    pytest.param({"slice": 1800}, "slice_seconds", 1800, id="slice-at-min-slice"),
    pytest.param({"max_runtime": "90m"}, "max_runtime", 5400, id="time-limit"),
    pytest.param({"gpu_types": ["H100"]}, "gpu_types", ["H100"], id="gpu-types"),
    pytest.param({"clusters": ["lab"]}, "clusters", ["lab"], id="clusters"),
    pytest.param({"name": "renamed-run"}, "name", "renamed-run", id="name"),
]


@pytest.mark.parametrize(("fields", "key", "value"), ACCEPTED)
def test_each_field_is_updated(api: Api, fields: dict[str, Any], key: str, value: Any) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8}, hold=True)
    response = update(api, "chen", job, **fields)
    assert response.status_code == 200, response.text
    assert detail(api, job)[key] == value
    [change] = response.json()["changes"]
    assert change["after"] == value and change["before"] != value
    assert revision(api, job) == 1
    assert [(a, who, list(d)) for a, who, d in audits(api, job)] == [("jobs.update", "chen", [change["field"]])]


REFUSED = [
    # (fields asked, the field the 422 names, words of its reason)
    pytest.param({"priority": 1001}, "priority", "less than or equal to 1000", id="priority-above-the-bound"),
    pytest.param({"priority": "high"}, "priority", "integer", id="priority-not-a-number"),
    pytest.param({"gpus": 0}, "gpus", "", id="zero-gpus"),
    pytest.param({"gpus": 1.5}, "gpus", "whole", id="fractional-gpus"),
    pytest.param({"gpus": 16}, "gpus", "exceeds the largest node", id="more-gpus-than-a-node"),
    pytest.param({"replicas": 5}, "replicas", "whole nodes", id="more-replicas-than-the-fleet"),
    pytest.param({"replicas": 0}, "replicas", "greater than or equal to 1", id="zero-replicas"),
    pytest.param({"slice": "10m"}, "slice", "a run slice lasts", id="slice-below-min-slice"),
    pytest.param({"slice": "9h"}, "slice", "a run slice lasts", id="slice-above-max-slice"),
    pytest.param({"slice": "soon"}, "slice", "", id="slice-not-a-duration"),
    pytest.param({"max_runtime": 0}, "max_runtime", "must be positive", id="time-limit-zero"),
    pytest.param({"gpu_types": ["B200"]}, "gpu_types[0]", "unknown GPU type", id="unknown-gpu-type"),
    pytest.param({"clusters": ["nowhere"]}, "clusters[0]", "unknown cluster", id="unknown-cluster"),
    pytest.param({"name": "no spaces"}, "name", "", id="name-not-a-name"),
    pytest.param({"budget": "finetune"}, "budget", "not permitted", id="the-budget-is-not-updated"),
    pytest.param({}, "", "at least one field", id="nothing-asked"),
]


@pytest.mark.parametrize(("fields", "field", "words"), REFUSED)
def test_a_refused_update_names_the_field_and_changes_nothing(
    api: Api, fields: dict[str, Any], field: str, words: str
) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8}, hold=True)
    before = detail(api, job)
    response = update(api, "chen", job, **fields)
    assert response.status_code == 422, response.text
    problems = response.json()["problems"]
    assert any(p["field"] == field and words in p["reason"] for p in problems), problems
    assert detail(api, job) == before
    assert revision(api, job) == 0 and audits(api, job) == []


def test_a_session_is_held_to_the_session_limits(api: Api) -> None:
    response = api.call("POST", "/sessions", "chen", {"budget": "pretrain", "gpus": 8, "length": "1h"})
    assert response.status_code == 201, response.text
    session = str(response.json()["job"]["id"])
    refused = update(api, "chen", session, gpus=1, replicas=9)  # 9 GPUs: one more than session_max_gpus
    assert refused.status_code == 422 and "a session holds at most 8 GPUs" in refused.text


WHO = [
    pytest.param("chen", 200, id="owner"),
    pytest.param("ben", 200, id="lead-of-the-subtree"),
    pytest.param("ada", 200, id="administrator"),
    pytest.param("eli", 403, id="outsider"),
]


@pytest.mark.parametrize(("caller", "status"), WHO)
def test_who_may_update_a_job_is_who_may_cancel_it(api: Api, caller: str, status: int) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8}, hold=True)
    response = update(api, caller, job, priority=3)
    assert response.status_code == status, response.text
    assert detail(api, job)["priority"] == (3 if status == 200 else 0)


def test_only_a_pending_job_is_updated(api: Api) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8})
    api.rig.step(api.rig.clock.now() + 1)
    assert detail(api, job)["state"] == "running"
    refused = update(api, "chen", job, priority=5)
    assert refused.status_code == 409 and "only a pending job can be updated" in refused.text
    api.call("POST", f"/jobs/{job}/cancel", "chen")
    for _ in range(3):  # SIGTERM, its grace, the end
        api.rig.step(api.rig.clock.now() + 120)
    assert detail(api, job)["state"] == "cancelled"
    assert update(api, "chen", job, priority=5).status_code == 409
    assert update(api, "chen", "j-nosuchjob", priority=5).status_code == 404
    assert detail(api, job)["priority"] == 0 and audits(api, job) == []


def test_asking_for_what_the_job_has_changes_nothing(api: Api) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8}, priority=2, hold=True)
    api.wake.clear()
    response = update(api, "chen", job, gpus=8, priority=2)
    assert response.status_code == 200 and response.json()["changes"] == []
    assert not api.wake.is_set() and revision(api, job) == 0 and audits(api, job) == []


def test_the_engine_schedules_the_job_as_updated(api: Api) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8}, hold=True)
    api.rig.step(api.rig.clock.now() + 1)  # the engine has read the job as submitted
    api.wake.clear()
    response = update(api, "chen", job, gpus=2, slice="45m", priority=9)
    assert response.status_code == 200, response.text
    assert api.wake.is_set()  # the engine is told at once
    changes = {c["field"]: (c["before"], c["after"]) for c in response.json()["changes"]}
    assert changes == {"gpus": (8, 2), "slice": (3600, 2700), "priority": (0, 9)}
    [(action, actor, recorded)] = audits(api, job)
    assert (action, actor, recorded) == ("jobs.update", "chen", {"gpus": [8, 2], "slice": [3600, 2700],
                                                                 "priority": [0, 9]})  # fmt: skip
    api.call("POST", f"/jobs/{job}/release", "chen")
    api.rig.step(api.rig.clock.now() + 1)
    started = detail(api, job)
    assert started["state"] == "running"
    [run] = started["runs"]
    assert sum(len(p["gpus"]) for p in run["placement"]) == 2  # the job as updated, not as submitted
    assert run["slice_end"] - run["started_at"] == 2700
