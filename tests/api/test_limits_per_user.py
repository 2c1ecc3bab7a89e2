"""Limits are per user, not per token (decision 53): a user's many tokens share one submission bucket, tokens are
issued at a bounded rate per user and a user holds at most `max_tokens` live tokens; beyond a limit the answer is
429 (rate) or 409 (cap) in the standard error shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from allotment.api import create_app
from allotment.engine.setup import Settings
from allotment.service.tokens import issue
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.engine.rig import SMALL, Rig

SPEC = {"spec": {"budget": "pretrain", "command": ["train"]}}


@dataclasses.dataclass
class Server:
    client: TestClient
    app: Any

    def post(self, path: str, secret: str | None, body: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        response: httpx.Response = self.client.post(path, json=body, headers=headers)
        return response

    def secret(self, user: str) -> str:
        return issue(self.app.state.context, user).secret


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    rig = Rig(engine)

    def build(open_login: bool = False, **limits: Any) -> Server:
        settings = dataclasses.replace(Settings(config=SMALL, data_dir=tmp_path), **limits)
        app = create_app(rig.sessions, settings, None, rig.clock.now, open_login=open_login)
        return Server(TestClient(app, base_url="http://127.0.0.1"), app)

    try:
        yield build
    finally:
        engine.dispose()


def assert_error(response: httpx.Response, status: int, error: str, *words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "message", "problems"} and body["error"] == error
    for word in words:
        assert word in body["message"]


def test_two_hundred_tokens_of_one_user_share_one_submission_bucket(make: Any) -> None:
    server = make(submit_rate=0.01, submit_burst=2, max_tokens=500)
    secrets = [server.secret("ben") for _ in range(200)]
    codes = [server.post("/jobs", s, SPEC).status_code for s in secrets[:10]]
    assert codes == [201, 201] + [429] * 8  # the old per-token buckets answered 201 ten times
    limited = server.post("/jobs", secrets[-1], SPEC)
    assert_error(limited, 429, "rate_limited", "ben")
    assert int(limited.headers["Retry-After"]) >= 1
    assert server.post("/jobs", server.secret("chen"), SPEC).status_code == 201  # another user's own bucket


def test_sessions_spend_the_same_bucket_as_jobs(make: Any) -> None:
    server = make(submit_rate=0.01, submit_burst=1)
    secret = server.secret("ben")
    assert server.post("/jobs", secret, SPEC).status_code == 201
    assert_error(server.post("/sessions", secret, {"budget": "pretrain", "gpus": 1}), 429, "rate_limited")


@pytest.mark.parametrize(
    ("path", "caller", "user"),
    [
        pytest.param("/auth/tokens", "chen", "chen", id="own-token"),
        pytest.param("/auth/login", "ada", "chen", id="admin-login-for-another"),
        pytest.param("/auth/login", None, "chen", id="open-login"),
    ],
)
def test_the_token_beyond_the_cap_is_refused_until_one_is_revoked(
    make: Any, path: str, caller: str | None, user: str
) -> None:
    server = make(open_login=True, max_tokens=3, token_rate=0)
    auth = server.secret(caller) if caller else None
    room = 3 - (caller == user)  # the caller's own token is one of the user's live tokens
    issued = [server.post(path, auth, {"user": user}) for _ in range(room)]
    assert [r.status_code for r in issued] == [201] * room
    refused = server.post(path, auth, {"user": user})
    assert_error(refused, 409, "conflict", "3 live tokens", "revoke")
    admin = {"Authorization": f"Bearer {server.secret('ada')}"}
    server.client.delete(f"/auth/tokens/{issued[0].json()['token']['id']}", headers=admin)
    assert server.post(path, auth, {"user": user}).status_code == 201  # a revoked token no longer counts


def test_tokens_are_issued_at_a_bounded_rate_per_user(make: Any) -> None:
    server = make(token_rate=0.01, token_burst=2)
    chen, ada = server.secret("chen"), server.secret("ada")
    assert [server.post("/auth/tokens", chen, {"user": "chen"}).status_code for _ in range(3)] == [201, 201, 429]
    assert_error(server.post("/auth/tokens", chen, {"user": "chen"}), 429, "rate_limited", "chen")
    assert_error(server.post("/auth/tokens", ada, {"user": "chen"}), 429, "rate_limited")  # per user, not per caller
    assert server.post("/auth/tokens", ada, {"user": "ben"}).status_code == 201


def test_a_refused_request_does_not_spend_another_users_allowance(make: Any) -> None:
    server = make(token_rate=0.01, token_burst=1)
    eli = server.secret("eli")
    for _ in range(5):
        assert server.post("/auth/tokens", eli, {"user": "ben"}).status_code == 403
    assert server.post("/auth/tokens", server.secret("ben"), {"user": "ben"}).status_code == 201
