"""The authentication cache (service/tokens.py) keeps tokens' promises: an expired token fails at its expiry to
the second, a token revoked through this server fails at once, and one revoked by another instance (straight in
the database) fails within AUTH_CACHE_SECONDS."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import Engine

from allotment.service import tokens
from allotment.store.tables import ApiTokenRow
from tests.api.conftest import make_api


def test_cached_tokens_still_expire_and_revoke_on_time(db: Engine, tmp_path: Path) -> None:
    api = make_api(db, tmp_path)
    created = api.call("POST", "/auth/tokens", "eli", {"user": "eli", "ttl": "1h"}).json()
    secret, token_id = created["secret"], created["token"]["id"]
    me = {"Authorization": f"Bearer {secret}"}
    assert api.client.get("/auth/me", headers=me).status_code == 200  # now cached
    api.rig.clock.t += 3600
    assert "expired" in api.client.get("/auth/me", headers=me).json()["message"]
    api.rig.clock.t -= 3600

    other = api.call("POST", "/auth/tokens", "eli", {"user": "eli"}).json()
    theirs = {"Authorization": f"Bearer {other['secret']}"}
    assert api.client.get("/auth/me", headers=theirs).status_code == 200
    assert api.call("DELETE", f"/auth/tokens/{other['token']['id']}", "eli").status_code == 200
    assert "revoked" in api.client.get("/auth/me", headers=theirs).json()["message"]  # at once, cached or not

    with api.rig.sessions.begin() as s:  # another instance revokes it: only the database knows
        row = s.get(ApiTokenRow, token_id)
        assert row is not None
        row.revoked_at = api.rig.clock.now()
    time.sleep(tokens.AUTH_CACHE_SECONDS + 0.1)
    assert "revoked" in api.client.get("/auth/me", headers=me).json()["message"]
