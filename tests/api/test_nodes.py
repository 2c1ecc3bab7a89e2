"""Nodes through the API: drain returns when the node will be empty and changes its state; forced drains refund."""

from __future__ import annotations

from sqlalchemy import select

from allotment.store.tables import AuditRow, NodeRow
from tests.api.conftest import Api


def test_drain_returns_the_estimated_empty_time_and_the_engine_acts_on_it(api: Api) -> None:
    job = api.submit("ben", "pretrain", resources={"gpus": 8}, grace="2m")
    t = api.rig.clock.now()
    api.rig.step()
    node = api.call("GET", f"/jobs/{job}", "ben").json()["runs"][0]["placement"][0]["node"]
    listed = {n["name"]: n for n in api.call("GET", "/nodes", "eli").json()}
    assert listed[node]["jobs"][0]["job_id"] == job and listed[node]["free_gpus"] == 0
    api.rig.step(t + 100)
    api.wake.clear()
    response = api.call("POST", f"/nodes/{node}/drain", "fay", {"why": "ECC errors"})
    assert response.status_code == 200, response.text
    assert api.wake.is_set()
    body = response.json()
    assert body["empty_by"] == t + 3600 + 120  # its slice end plus its grace
    assert body["node"]["state"] == "draining" and body["node"]["reason"] == "ECC errors"
    with api.rig.sessions() as s:
        assert s.get(NodeRow, node).state == "draining"  # type: ignore[union-attr]
        record = s.scalars(select(AuditRow).where(AuditRow.action == "node.drain")).one()
        assert (record.actor, record.target, record.why) == ("fay", f"node:{node}", "ECC errors")
    api.rig.step(t + 200)
    assert api.call("GET", f"/jobs/{job}", "ben").json()["state"] == "running"  # inside its slice: it stays
    empty = api.call("POST", "/nodes/lab-h100-0003/drain", "fay").json()
    assert empty["empty_by"] == t + 200  # nothing runs there: empty now
    resumed = api.call("POST", f"/nodes/{node}/resume", "fay")
    assert resumed.status_code == 200 and resumed.json()["state"] == "ready" and resumed.json()["reason"] is None
    cordoned = api.call("POST", f"/nodes/{node}/cordon", "ada", {"why": "firmware"})
    assert cordoned.json()["state"] == "cordoned"
    assert api.call("POST", "/nodes/nowhere/drain", "fay").status_code == 404


def test_a_forced_drain_ends_jobs_now_and_the_engine_refunds_the_owner(api: Api) -> None:
    job = api.submit("ben", "pretrain", resources={"gpus": 8}, grace="30s")
    t = api.rig.clock.now()
    api.rig.step()
    node = api.call("GET", f"/jobs/{job}", "ben").json()["runs"][0]["placement"][0]["node"]
    api.rig.step(t + 900)
    assert api.call("POST", f"/nodes/{node}/drain", "fay", {"force": True}).status_code == 403
    response = api.call("POST", f"/nodes/{node}/drain", "ada", {"force": True, "why": "PSU failure"})
    assert response.status_code == 200 and response.json()["empty_by"] == t + 900 + 30
    assert response.json()["node"]["forced"] is True
    api.rig.step(t + 901)
    api.rig.step(t + 902)
    detail = api.call("GET", f"/jobs/{job}", "ben").json()
    assert detail["runs"][0]["preempt_reason"] == "forced-drain"
    assert detail["charged_micro"] == 0  # refunded; the infrastructure account pays
    assert api.rig.charged("infrastructure") > 0
