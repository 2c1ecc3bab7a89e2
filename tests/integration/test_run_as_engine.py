"""The finding of issue 22, end to end: a member's job tries to mint an admin token in the server's database.

Before: the job ran as the server's account, opened the SQLite file, inserted an `api_tokens` row for the admin
with a known secret's hash, and `GET /auth/me` with that secret answered `admin: true`. Now a server built in owner
mode (allotment.engine.setup.build, the real composition root, with the local executor and real Unix accounts) runs
the job as its owner: the database and the data directory are out of its reach, the token is never written, and the
secret authenticates nobody.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlalchemy import select

from allotment.api import create_app
from allotment.engine.setup import Built, Settings, build
from allotment.executors.accounts import Account
from allotment.service.tokens import token_hash
from allotment.store.tables import ApiTokenRow
from tests.accounts import open_root, unix_accounts
from tests.integration.conftest import stop_everything
from tests.integration.support import SMALL, add_job, final, job, runs, step_until

SECRET = "allot_known-secret-of-the-attacker"

MINT = """
import sqlite3, sys
try:
    db = sqlite3.connect(sys.argv[1])
    db.execute(
        "INSERT INTO api_tokens (id, user, name, token_hash, created_at, expires_at)"
        " VALUES ('pwn', 'ada', 'x', ?, 0, 4000000000)",
        (sys.argv[2],),
    )
    db.commit()
    print("MINTED")
except Exception as exc:
    print("REFUSED", type(exc).__name__, exc)
"""


@pytest.fixture
def owner_server() -> Iterator[tuple[Built, Path, Account]]:
    with unix_accounts(1) as [ben], open_root() as root:
        config = yaml.safe_load(SMALL.read_text())
        config["run_as"] = {"mode": "owner", "accounts": {"ben": ben.name}}
        path = root / "allotment.yaml"
        path.write_text(yaml.safe_dump(config))
        built = build(Settings(config=path, data_dir=root / "data", executor="local"))
        try:
            yield built, root, ben
        finally:
            stop_everything(built)
            built.close()


def test_a_members_job_cannot_mint_an_admin_token(owner_server: tuple[Built, Path, Account]) -> None:
    built, root, _ = owner_server
    db = root / "data" / "allotment.db"
    argv = ["/usr/bin/python3", "-c", MINT, str(db), token_hash(SECRET)]
    job_id = add_job(built, "pretrain", "ben", argv, 1)
    step_until(built, final(built, job_id), what="the job to end")
    assert job(built, job_id).state == "completed" and runs(built, job_id)[-1].exit_code == 0

    output = (root / "data" / "executor" / "jobs" / job_id / "0" / "output.log").read_text()
    assert output.startswith("REFUSED"), output
    with built.sessions() as s:
        assert s.scalars(select(ApiTokenRow).where(ApiTokenRow.token_hash == token_hash(SECRET))).first() is None
    settings = Settings(config=root / "allotment.yaml", data_dir=root / "data")
    app = create_app(
        built.sessions, settings, threading.Event(), built.engine.clock.now, config=built.config, run_as=built.run_as
    )
    with TestClient(app) as client:
        assert client.get("/auth/me", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 401
        assert client.get("/health").json()["run_as"] == "owner"


def test_the_server_reports_owner_mode_and_its_job_directory_is_the_owners(
    owner_server: tuple[Built, Path, Account],
) -> None:
    built, root, ben = owner_server
    assert built.run_as.owner
    job_id = add_job(built, "pretrain", "ben", ["/bin/sh", "-c", "id -un; pwd"], 1)
    step_until(built, final(built, job_id), what="the job to end")
    output = (root / "data" / "executor" / "jobs" / job_id / "0" / "output.log").read_text().split()
    assert output == [ben.name, str(root / "data-jobs" / ben.name / f"{job_id}.0")]
