"""The run-as mode through the API (issue 22): /health says whose account jobs run as, and in owner mode a user
with no Unix account cannot submit (422 naming the user and the fix; nothing is written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from allotment.api import create_app
from allotment.engine.setup import Settings
from allotment.executors.accounts import Mode, RunAs
from allotment.store.tables import JobRow
from tests.accounts import unix_accounts
from tests.api.conftest import Api
from tests.engine.rig import SMALL, Rig


def jobs(api: Api) -> int:
    with api.rig.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(JobRow)) or 0)


def submit(api: Api, user: str) -> tuple[int, dict[str, Any]]:
    spec = {"budget": "pretrain", "command": ["train"], "resources": {"gpus": 1}}
    response = api.call("POST", "/jobs", user, {"spec": spec})
    body: dict[str, Any] = response.json()
    return response.status_code, body


def test_health_says_single_user_mode_by_default(api: Api) -> None:
    assert api.client.get("/health").json()["run_as"] == "single-user"


def test_health_says_owner_mode(api: Api) -> None:
    api.ctx.run_as = RunAs(Mode.OWNER)
    assert api.client.get("/health").json()["run_as"] == "owner"


@pytest.mark.parametrize(
    ("accounts", "account"),
    [
        pytest.param({}, "ben", id="same-name-account-missing"),
        pytest.param({"ben": "nobody-here-x"}, "nobody-here-x", id="mapped-account-missing"),
        pytest.param({"ben": "root"}, "root", id="mapped-to-root"),
    ],
)
def test_owner_mode_refuses_a_user_without_an_account(api: Api, accounts: dict[str, str], account: str) -> None:
    api.ctx.run_as = RunAs(Mode.OWNER, accounts)
    before = jobs(api)
    status, body = submit(api, "ben")
    assert status == 422, body
    assert body["error"] == "invalid"
    [problem] = body["problems"]
    assert problem["field"] == "user"
    assert f"user 'ben' has no Unix account {account!r}" in problem["reason"]
    assert f"useradd {account}" in problem["reason"] and "run_as.accounts" in problem["reason"]
    assert jobs(api) == before


def test_owner_mode_accepts_a_user_mapped_to_an_account(api: Api) -> None:
    with unix_accounts(1) as [account]:
        api.ctx.run_as = RunAs(Mode.OWNER, {"ben": account.name})
        status, body = submit(api, "ben")
        assert status == 201, body


def test_single_user_mode_accepts_users_without_accounts(api: Api) -> None:
    status, body = submit(api, "ben")
    assert status == 201, body


def test_open_login_is_refused_in_owner_mode(db: Engine, tmp_path: Path) -> None:
    rig = Rig(db)
    settings = Settings(config=SMALL, data_dir=tmp_path)
    with pytest.raises(ValueError, match="single-user server only"):
        create_app(rig.sessions, settings, None, rig.clock.now, open_login=True, run_as=RunAs(Mode.OWNER))
