"""API tests: the real FastAPI application over a real store (SQLite and PostgreSQL) seeded from the small example,
with the engine rig (simulated executor, manual clock) to run cycles when a test needs the engine's answer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from allotment.api import create_app
from allotment.engine.setup import Settings
from allotment.service.context import Context
from allotment.service.tokens import issue
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.databases import BACKENDS, postgres_engine
from tests.engine.rig import SMALL, Rig

USERS = ("ada", "ben", "chen", "dana", "eli", "fay")


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'allotment.db'}")
        upgrade(engine)
        try:
            yield engine
        finally:
            engine.dispose()
    else:
        for engine in postgres_engine():
            upgrade(engine)
            yield engine


@dataclass
class Api:
    rig: Rig
    client: TestClient
    ctx: Context
    wake: threading.Event
    tokens: dict[str, str] = field(default_factory=dict)

    def headers(self, user: str | None) -> dict[str, str]:
        if user is None:
            return {}
        return {"Authorization": f"Bearer {self.tokens.get(user, user)}"}

    def call(self, method: str, path: str, user: str | None, body: Any = None, **kw: Any) -> httpx.Response:
        headers = {**self.headers(user), **kw.pop("headers", {})}
        response: httpx.Response = self.client.request(method, path, json=body, headers=headers, **kw)
        return response

    def submit(self, user: str, budget: str, **spec: Any) -> str:
        body = {"spec": {"budget": budget, "command": ["train"], **spec}}
        response = self.call("POST", "/jobs", user, body)
        assert response.status_code == 201, response.text
        return str(response.json()["job"]["id"])


def make_api(db: Engine, tmp_path: Path, *, open_login: bool = False) -> Api:
    rig = Rig(db)
    wake = threading.Event()
    # Tests here issue many tokens and submit in bursts per user; the per-user limits have their own tests
    # (test_limits_per_user.py, tests/ops/test_rate_limit.py), so a burst never turns into a 429 here.
    settings = Settings(config=SMALL, data_dir=tmp_path, token_rate=0, submit_rate=0)
    app = create_app(rig.sessions, settings, wake, rig.clock.now, open_login=open_login)
    ctx = app.state.context
    api = Api(rig, TestClient(app, base_url="http://127.0.0.1"), ctx, wake)  # an allowed Host with open login
    for user in USERS:
        api.tokens[user] = issue(ctx, user).secret
    return api


@pytest.fixture
def api(db: Engine, tmp_path: Path) -> Iterator[Api]:
    made = make_api(db, tmp_path)
    with made.client:
        yield made
