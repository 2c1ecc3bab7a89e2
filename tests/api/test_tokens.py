"""Tokens: only hashes are stored, they expire and can be revoked; login and its trust model."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, select

from allotment.service.tokens import token_hash
from allotment.store.tables import ApiTokenRow
from tests.api.conftest import Api, make_api


def test_tokens_are_stored_hashed_expire_and_can_be_revoked(api: Api) -> None:
    created = api.call("POST", "/auth/tokens", "eli", {"user": "eli", "name": "laptop", "ttl": "1h"})
    assert created.status_code == 201
    secret, token = created.json()["secret"], created.json()["token"]
    assert token["expires_at"] == api.rig.clock.now() + 3600
    with api.rig.sessions() as s:
        row = s.get(ApiTokenRow, token["id"])
        assert row is not None and row.token_hash == token_hash(secret)
        assert all(secret not in str(v) for v in vars(row).values())
    me = api.client.get("/auth/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert me == {
        "user": "eli",
        "admin": False,
        "operator": False,
        "roles": {"detection": "member", "finetune": "member", "segmentation": "member"},
    }
    listed = api.call("GET", "/auth/tokens", "eli").json()
    assert {t["name"] for t in listed} == {"token", "laptop"} and all("secret" not in t for t in listed)
    assert any(t["last_used_at"] == api.rig.clock.now() for t in listed if t["id"] == token["id"])
    api.rig.clock.t += 3600
    expired = api.client.get("/auth/me", headers={"Authorization": f"Bearer {secret}"})
    assert expired.status_code == 401 and expired.headers["WWW-Authenticate"] == "Bearer"
    assert "expired" in expired.json()["message"]
    assert api.call("DELETE", f"/auth/tokens/{listed[0]['id']}", "chen").status_code == 403
    mine = next(t for t in listed if t["name"] == "token")
    assert api.call("DELETE", f"/auth/tokens/{mine['id']}", "eli").status_code == 200
    revoked = api.call("GET", "/auth/me", "eli")
    assert revoked.status_code == 401 and "revoked" in revoked.json()["message"]


def test_login_needs_an_admin_token_unless_the_server_allows_open_login(db: Engine, tmp_path: Path) -> None:
    closed = make_api(db, tmp_path)
    assert closed.call("POST", "/auth/login", None, {"user": "chen"}).status_code == 401
    by_admin = closed.call("POST", "/auth/login", "ada", {"user": "chen"})
    assert by_admin.status_code == 201 and by_admin.json()["token"]["user"] == "chen"
    assert closed.call("POST", "/auth/login", "ada", {"user": "mallory"}).status_code == 404
    opened = make_api(db, tmp_path, open_login=True)
    token = opened.call("POST", "/auth/login", None, {"user": "chen"})
    assert token.status_code == 201
    secret = token.json()["secret"]
    me = opened.client.get("/auth/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert me["user"] == "chen"
    assert opened.call("POST", "/auth/login", None, {"user": "mallory"}).status_code == 404
    with opened.rig.sessions() as s:
        assert (
            len(list(s.scalars(select(ApiTokenRow).where(ApiTokenRow.user == "chen")))) == 4
        )  # two issued by the fixtures, two by login
