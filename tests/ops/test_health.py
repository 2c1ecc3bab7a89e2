"""/healthz (liveness) and /readyz (database reachable, scheduler cycling recently, this instance's role)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from allotment.api.routers.health import READY_WITHIN
from allotment.ops.state import PROCESS, Role
from tests.api.conftest import make_api


def test_ready_only_while_the_database_answers_and_the_engine_cycles(db: Engine, tmp_path: Path) -> None:
    api = make_api(db, tmp_path)
    assert api.client.get("/healthz").json() == {"status": "ok"}
    waiting = api.client.get("/readyz")
    assert waiting.status_code == 503
    assert waiting.json()["database"] is True and waiting.json()["cycling"] is False
    api.rig.step()
    PROCESS.set_role(Role.LEADER)
    try:
        ready = api.client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() | {"time": 0} == {
            "ready": True,
            "database": True,
            "cycling": True,
            "last_cycle": api.rig.clock.now(),
            "role": "leader",
            "time": 0,
        }
    finally:
        PROCESS.reset()
    api.rig.clock.t += READY_WITHIN + 1
    stalled = api.client.get("/readyz")
    assert stalled.status_code == 503 and stalled.json()["cycling"] is False


def test_not_ready_and_503_on_requests_while_the_database_is_gone(tmp_path: Path) -> None:
    from allotment.store.db import make_engine
    from allotment.store.migrate import upgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    api = make_api(engine, tmp_path)
    token = api.tokens["ben"]
    api.rig.step()
    (tmp_path / "a.db").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"a.db{suffix}").unlink(missing_ok=True)
    engine.dispose()
    (tmp_path / "a.db").mkdir()  # the file is now a directory: every connection fails
    gone = api.client.get("/readyz")
    assert gone.status_code == 503 and gone.json()["database"] is False
    assert api.client.get("/healthz").status_code == 200
    refused = api.client.get("/jobs", headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
