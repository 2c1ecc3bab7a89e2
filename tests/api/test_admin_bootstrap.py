"""`allot admin token` on the server's host: the first administrator's token from the server's database (no HTTP,
no open login), shown once; it authenticates as an administrator through the API; a user who is not an
administrator in the configuration is refused with how to make them one. Real SQLite, through the CLI's entry
point in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from allotment.api import create_app
from allotment.engine.setup import Settings
from allotment.store.db import make_engine, session_factory
from tests.engine.rig import ROOT, SMALL


def allot(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "allotment.cli", *args], check=False, capture_output=True, text=True, env=env, timeout=99
    )


def test_the_first_admin_token_comes_from_the_servers_database(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = allot("admin", "token", "--user", "ada", "--config", str(SMALL), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    secret = done.stdout.strip()
    assert secret.startswith("allot_") and secret not in done.stderr
    engine = make_engine(f"sqlite:///{data / 'allotment.db'}")
    try:
        app = create_app(session_factory(engine), Settings(config=SMALL, data_dir=data), None, lambda: int(time.time()))
        me = TestClient(app).get("/auth/me", headers={"Authorization": f"Bearer {secret}"})
    finally:
        engine.dispose()
    assert me.status_code == 200 and me.json()["user"] == "ada" and me.json()["admin"] is True
    assert (data / "allotment.db").stat().st_mode & 0o077 == 0  # created private, as the server's files are


@pytest.mark.parametrize(
    ("user", "words"),
    [
        pytest.param("chen", ("chen is not an administrator", "role: admin"), id="a-member-is-told-how-to-promote"),
        pytest.param("mallory", ("no user 'mallory'", "users:"), id="an-unknown-user-is-told-to-configure"),
    ],
)
def test_only_a_configured_administrator_gets_one(tmp_path: Path, user: str, words: tuple[str, ...]) -> None:
    done = allot("admin", "token", "--user", user, "--config", str(SMALL), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2 and "allot_" not in done.stdout
    for word in words:
        assert word in done.stderr
