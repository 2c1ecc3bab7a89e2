"""Requeueing a running job (POST /jobs/{id}/requeue, scontrol requeue and requeuehold): the API records the request
and the engine's next cycle stops the run with the job's grace; the job goes back to pending with the same id
(held when asked), starts again as a new attempt, and every run is charged exactly what it ran — round after round.
Only a running batch job is requeued, by whoever may cancel it, and each request is an audit record."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from allotment.core.units import cost
from allotment.executors.simulated import Outcome
from allotment.store.tables import AuditRow
from tests.api.conftest import Api

H100 = 1_000_000
"""Credit-microunits per H100 GPU-hour (the small example's only rate)."""


def requeue(api: Api, caller: str, job: str, hold: bool | None = None) -> Any:
    return api.call("POST", f"/jobs/{job}/requeue", caller, None if hold is None else {"hold": hold})


def detail(api: Api, job: str) -> dict[str, Any]:
    body: dict[str, Any] = api.call("GET", f"/jobs/{job}", "ada").json()
    return body


def tick(api: Api, seconds: int) -> dict[str, Any]:
    api.rig.step(api.rig.clock.now() + seconds)
    return detail(api, job=api.current)  # type: ignore[attr-defined]


def audits(api: Api, job: str) -> list[tuple[str, str]]:
    with api.ctx.sessions() as session:
        rows = session.scalars(select(AuditRow).where(AuditRow.target == job).order_by(AuditRow.id))
        return [(r.action, r.actor) for r in rows]


def charged_exactly(job: dict[str, Any]) -> None:
    """Every ended run's charges are what its GPUs ran, to the microunit, and nothing else was charged."""
    for run in job["runs"]:
        assert run["ended_at"] is not None
        gpus = sum(len(p["gpus"]) for p in run["placement"])
        posted = -sum(c["amount_micro"] for c in job["charges"] if c["run_id"] == run["id"])
        assert posted == cost(gpus, H100, run["price"], run["ended_at"] - run["started_at"]), run["id"]
    assert job["charged_micro"] == -sum(c["amount_micro"] for c in job["charges"])


def running_job(api: Api, checkpoint: int = 20) -> str:
    """chen's 8-GPU pretrain job, running; it takes `checkpoint` seconds to exit after SIGTERM (its grace is 60 s)."""
    job = api.submit("chen", "pretrain", resources={"gpus": 8}, grace="60s")
    api.rig.outcomes[job] = Outcome(duration=None, sigterm_exit_after=checkpoint)
    api.current = job  # type: ignore[attr-defined]
    assert tick(api, 1)["state"] == "running"
    return job


def test_a_requeued_job_stops_with_its_grace_waits_and_starts_again_charged_exactly(api: Api) -> None:
    job = running_job(api)
    assert tick(api, 900)["state"] == "running"  # 15 minutes of GPU time, charged as it goes

    # round 1: requeue; the request alone changes nothing the engine owns
    api.wake.clear()
    asked = requeue(api, "chen", job)
    assert asked.status_code == 200, asked.text
    assert (asked.json()["state"], asked.json()["requeues"]) == ("running", 1)
    assert api.wake.is_set()
    assert requeue(api, "chen", job).json()["requeues"] == 1  # asked twice before the cycle: one request
    leaving = tick(api, 1)
    assert leaving["state"] == "preempting" and leaving["runs"][0]["preempt_reason"] == "requeue-requested"
    assert leaving["runs"][0]["kill_at"] == leaving["runs"][0]["started_at"] + 901 + 60  # its grace
    again = tick(api, 20)  # it checkpointed and exited; back in the queue, and the idle fleet starts it again
    assert again["id"] == job and again["state"] == "running" and again["attempt"] == 2
    states = [(h["from_state"], h["to_state"]) for h in again["history"]]
    assert states[-3:] == [("running", "preempting"), ("preempting", "pending"), ("pending", "running")]
    assert "requeued on request" in again["history"][-2]["reason"]
    first, second = again["runs"]
    assert first["ended_at"] == first["started_at"] + 921 and second["started_at"] == first["ended_at"]

    # round 2: requeue held (requeuehold): it waits, cycle after cycle, until released
    assert tick(api, 600)["state"] == "running"
    assert requeue(api, "chen", job, hold=True).json()["hold"] == "user"
    tick(api, 1)
    held = tick(api, 20)
    assert (held["state"], held["hold"], held["requeues"]) == ("pending", "user", 2)
    for _ in range(3):
        assert tick(api, 60)["state"] == "pending"
    assert api.call("GET", f"/jobs/{job}/why", "chen").json()["blocker"] == "held"
    api.call("POST", f"/jobs/{job}/release", "chen")
    third = tick(api, 1)
    assert third["state"] == "running" and third["attempt"] == 3 and len(third["runs"]) == 3

    # the end: every run charged exactly what it ran, to the budget that pays
    api.call("POST", f"/jobs/{job}/cancel", "chen")
    tick(api, 1)
    done = tick(api, 20)
    assert done["state"] == "cancelled"
    charged_exactly(done)
    assert {c["budget"] for c in done["charges"]} == {"pretrain"}
    assert audits(api, job) == [("jobs.requeue", "chen"), ("jobs.requeue", "chen"), ("jobs.release", "chen")]


def test_an_administrators_requeue_hold_is_an_admin_hold(api: Api) -> None:
    job = running_job(api, checkpoint=0)
    assert requeue(api, "ada", job, hold=True).json()["hold"] == "admin"
    tick(api, 1)  # told to leave; it exits at once, heard by the next cycle
    assert tick(api, 1)["state"] == "pending"
    refused = api.call("POST", f"/jobs/{job}/release", "chen")
    assert refused.status_code == 403 and "admin hold" in refused.text


WHO = [
    pytest.param("chen", 200, id="owner"),
    pytest.param("ben", 200, id="lead-of-the-subtree"),
    pytest.param("ada", 200, id="administrator"),
    pytest.param("eli", 403, id="outsider"),
    pytest.param("fay", 403, id="operator"),
]


@pytest.mark.parametrize(("caller", "status"), WHO)
def test_who_may_requeue_is_who_may_cancel(api: Api, caller: str, status: int) -> None:
    job = running_job(api, checkpoint=0)
    assert requeue(api, caller, job).status_code == status
    tick(api, 1)
    after = tick(api, 1)  # requeued and started again on the idle fleet, or untouched
    assert (after["state"], after["attempt"]) == ("running", 2 if status == 200 else 1)
    assert after["runs"][0]["preempt_reason"] == ("requeue-requested" if status == 200 else None)
    assert audits(api, job) == ([("jobs.requeue", caller)] if status == 200 else [])


def pending(api: Api) -> str:
    return api.submit("chen", "pretrain", resources={"gpus": 8}, hold=True)


def preempting(api: Api) -> str:
    job = running_job(api, checkpoint=30)
    requeue(api, "chen", job)
    assert tick(api, 1)["state"] == "preempting"
    return job


def finished(api: Api) -> str:
    job = running_job(api, checkpoint=0)
    api.call("POST", f"/jobs/{job}/cancel", "chen")
    tick(api, 1)
    assert tick(api, 1)["state"] == "cancelled"
    return job


def being_cancelled(api: Api) -> str:
    job = running_job(api, checkpoint=0)
    api.call("POST", f"/jobs/{job}/cancel", "chen")
    return job


def session(api: Api) -> str:
    response = api.call("POST", "/sessions", "chen", {"budget": "pretrain", "gpus": 1, "length": "1h"})
    job = str(response.json()["job"]["id"])
    api.current = job  # type: ignore[attr-defined]
    assert tick(api, 1)["state"] == "running"
    return job


REFUSED = [
    pytest.param(pending, "a pending one is in the queue already", id="pending"),
    pytest.param(preempting, "already being stopped", id="preempting"),
    pytest.param(finished, "a finished job is not requeued: submit it again", id="finished"),
    pytest.param(being_cancelled, "being cancelled", id="being-cancelled"),
    pytest.param(session, "a session is not requeued", id="session"),
]


@pytest.mark.parametrize(("make", "words"), REFUSED)
def test_only_a_running_batch_job_is_requeued(api: Api, make: Any, words: str) -> None:
    job = make(api)
    before, recorded = detail(api, job), audits(api, job)
    refused = requeue(api, "chen", job, hold=True)
    assert refused.status_code == 409 and words in refused.text, refused.text
    after = detail(api, job)
    assert (after["requeues"], after["hold"]) == (before["requeues"], before["hold"])
    assert audits(api, job) == recorded


def test_unknown_jobs_and_bodies_are_refused(api: Api) -> None:
    assert requeue(api, "chen", "j-nosuchjob").status_code == 404
    job = running_job(api, checkpoint=0)
    bad = api.call("POST", f"/jobs/{job}/requeue", "chen", {"hold": "yes"})
    assert bad.status_code == 422 and "hold" in bad.text
    assert detail(api, job)["requeues"] == 0
