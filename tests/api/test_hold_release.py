"""Holding and releasing pending jobs (POST /jobs/{id}/hold and /release, scontrol hold/uhold/release): a held job
is never started however free the fleet is, its reason (why, queue) says which hold, a user cannot release an admin
hold, only pending jobs are held, and every change leaves an audit record."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from allotment.store.tables import AuditRow
from tests.api.conftest import Api


def held(api: Api, caller: str, job: str, kind: str | None = None) -> Any:
    return api.call("POST", f"/jobs/{job}/hold", caller, {"kind": kind} if kind else None)


def released(api: Api, caller: str, job: str) -> Any:
    return api.call("POST", f"/jobs/{job}/release", caller)


def why(api: Api, job: str) -> dict[str, Any]:
    body: dict[str, Any] = api.call("GET", f"/jobs/{job}/why", "ada").json()
    return body


def state(api: Api, job: str) -> str:
    return str(api.call("GET", f"/jobs/{job}", "ada").json()["state"])


def audits(api: Api, job: str) -> list[tuple[str, str]]:
    with api.ctx.sessions() as session:
        rows = session.scalars(select(AuditRow).where(AuditRow.target == job).order_by(AuditRow.id))
        return [(r.action, r.actor) for r in rows]


HOLDS = [
    # (caller, kind asked, status, hold set) on chen's pending pretrain job
    pytest.param("chen", None, 200, "user", id="owner-default-is-a-user-hold"),
    pytest.param("ben", None, 200, "user", id="lead-of-the-subtree-holds"),
    pytest.param("ada", None, 200, "admin", id="administrator-default-is-an-admin-hold"),
    pytest.param("ada", "user", 200, "user", id="administrator-asks-a-user-hold-uhold"),
    pytest.param("chen", "admin", 403, None, id="owner-may-not-set-an-admin-hold"),
    pytest.param("eli", None, 403, None, id="outsider-may-not-hold"),
]


@pytest.mark.parametrize(("caller", "kind", "status", "hold"), HOLDS)
def test_who_may_hold_and_which_hold_they_set(
    api: Api, caller: str, kind: str | None, status: int, hold: str | None
) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8})
    response = held(api, caller, job, kind)
    assert response.status_code == status, response.text
    assert api.call("GET", f"/jobs/{job}", "ada").json()["hold"] == hold
    assert audits(api, job) == ([("jobs.hold", caller)] if hold else [])


def test_a_held_job_waits_with_its_hold_as_reason_and_starts_once_released(api: Api) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8})
    api.wake.clear()
    assert held(api, "chen", job).json()["hold"] == "user"
    assert api.wake.is_set()  # the engine is told at once
    for _ in range(3):  # the fleet is empty: only the hold keeps it waiting, cycle after cycle
        api.rig.step(api.rig.clock.now() + 60)
        assert state(api, job) == "pending"
    reason = why(api, job)
    assert reason["blocker"] == "held" and "user hold" in reason["message"]
    assert f"allot release {job}" in reason["message"]
    queued = api.call("GET", "/jobs/queue", "ben").json()["items"]
    assert [(q["id"], q["blocker"]) for q in queued] == [(job, "held")]
    assert released(api, "chen", job).json()["hold"] is None
    api.rig.step(api.rig.clock.now() + 1)
    assert state(api, job) == "running"
    assert audits(api, job) == [("jobs.hold", "chen"), ("jobs.release", "chen")]


def test_a_user_cannot_release_an_admin_hold_nor_weaken_it(api: Api) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8})
    assert held(api, "ada", job).json()["hold"] == "admin"
    assert held(api, "chen", job).json()["hold"] == "admin"  # a user hold on top leaves the admin hold
    refused = released(api, "chen", job)
    assert refused.status_code == 403 and "admin hold" in refused.text
    api.rig.step(api.rig.clock.now() + 1)
    assert state(api, job) == "pending"
    assert why(api, job)["blocker"] == "held" and "administrator" in why(api, job)["message"]
    assert released(api, "ada", job).json()["hold"] is None
    api.rig.step(api.rig.clock.now() + 1)
    assert state(api, job) == "running"


def test_only_a_pending_job_is_held_and_unknown_input_is_refused(api: Api) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8})
    api.rig.step(api.rig.clock.now() + 1)
    assert state(api, job) == "running"
    refused = held(api, "chen", job)
    assert refused.status_code == 409 and "only a pending job can be held" in refused.text
    assert released(api, "chen", job).status_code == 409
    assert held(api, "chen", "j-nosuchjob").status_code == 404
    bad = api.call("POST", f"/jobs/{job}/hold", "chen", {"kind": "forever"})
    assert bad.status_code == 422 and "kind" in bad.text
    assert audits(api, job) == []


def test_a_held_job_can_still_be_cancelled(api: Api) -> None:
    job = api.submit("chen", "pretrain", resources={"gpus": 8})
    held(api, "chen", job)
    assert api.call("POST", f"/jobs/{job}/cancel", "chen").status_code == 200
    api.rig.step(api.rig.clock.now() + 1)
    assert state(api, job) == "cancelled"
    assert released(api, "chen", job).status_code == 409
