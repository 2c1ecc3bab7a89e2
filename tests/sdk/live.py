"""A real Allotment server for client tests: engine + local executor + HTTP API (open login) on a free port.

Owns: starting one from a configuration on SQLite (a temporary file) or PostgreSQL (a fresh schema from
tests/databases.py), issuing tokens for the configured users, and stopping it with every job process it started.
Must not: mock anything: the SDK and the CLI talk to it over real HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from allotment.api import attach_api
from allotment.engine.server import Server
from allotment.engine.setup import Settings, build
from tests.databases import postgres_engine

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
USERS = ("ada", "ben", "chen", "dana", "eli", "fay")


@dataclass
class LiveServer:
    url: str
    data_dir: Path
    server: Server
    tokens: dict[str, str] = field(default_factory=dict)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll until `check()` holds; fail the test (a hang, not a speed check) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def _stop(server: Server) -> None:
    server.shutdown()
    executor = server.built.engine.executor
    deadline = time.monotonic() + 15
    while (alive := executor.alive()) and time.monotonic() < deadline:
        for job_id, attempt in alive.items():
            executor.terminate(job_id, attempt, 0)
        executor.poll()
        time.sleep(0.2)


@contextmanager
def live_server(data_dir: Path, *, postgres: bool = False, config: Path = SMALL) -> Iterator[LiveServer]:
    """A running server; PostgreSQL when `postgres` (skipped locally, failed under CI=true, when unreachable)."""
    with _database(data_dir, postgres) as url:
        settings = Settings(config=config, data_dir=data_dir, database_url=url, executor="local", charge_every=5)
        server = Server(build(settings), interval=0.5)
        server.start()
        try:
            api = attach_api(server, "127.0.0.1", 0, settings=settings, open_login=True)
            live = LiveServer(api.url, data_dir, server)
            with httpx.Client(base_url=api.url, timeout=30) as http:
                for user in USERS:
                    response = http.post("/auth/login", json={"user": user, "name": "tests"})
                    response.raise_for_status()
                    live.tokens[user] = response.json()["secret"]
            yield live
        finally:
            _stop(server)


@contextmanager
def _database(data_dir: Path, postgres: bool) -> Iterator[str]:
    if not postgres:
        data_dir.mkdir(parents=True, exist_ok=True)
        yield f"sqlite:///{data_dir / 'allotment.db'}"
        return
    for engine in postgres_engine():  # the schema is dropped when the loop ends
        yield engine.url.render_as_string(hide_password=False)
