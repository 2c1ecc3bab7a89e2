"""attach_api: the API served over a real socket next to an engine built from settings, stopping with the server."""

from __future__ import annotations

from pathlib import Path

import httpx

from allotment.api import attach_api
from allotment.engine.server import Server
from allotment.engine.setup import Settings, build
from tests.engine.rig import SMALL


def test_the_api_serves_next_to_the_engine_and_stops_with_it(tmp_path: Path) -> None:
    settings = Settings(config=SMALL, data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'allotment.db'}")
    server = Server(build(settings))
    api = attach_api(server, "127.0.0.1", 0, settings=settings, open_login=True)
    try:
        assert api.port > 0
        with httpx.Client(base_url=api.url, timeout=10) as client:
            assert client.get("/health").json()["status"] == "ok"
            secret = client.post("/auth/login", json={"user": "ben"}).json()["secret"]
            headers = {"Authorization": f"Bearer {secret}"}
            submitted = client.post(
                "/jobs", json={"spec": {"budget": "pretrain", "command": ["true"]}}, headers=headers
            )
            assert submitted.status_code == 201
            assert server.wake.is_set()  # the engine is told at once
            assert client.get("/openapi.json").json()["info"]["title"] == "Allotment"
    finally:
        server.shutdown()
        api.thread.join(10)
    assert not api.thread.is_alive()
