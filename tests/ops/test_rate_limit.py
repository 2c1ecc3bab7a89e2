"""Rate limiting of submissions per user: a token bucket per user; beyond it POST /jobs answers 429 with
Retry-After, other users and reads are unaffected (the many-tokens case is tests/api/test_limits_per_user.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from allotment.api import create_app
from allotment.engine.setup import Settings
from allotment.ops.metrics import RATE_LIMITED
from allotment.ops.ratelimit import TokenBuckets, retry_after
from allotment.service.tokens import issue
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.engine.rig import SMALL, Rig


class Ticks:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize(
    ("rate", "burst", "script", "expected"),
    [
        pytest.param(1.0, 2, [0, 0, 0], [0.0, 0.0, 1.0], id="burst-then-wait-one-interval"),
        pytest.param(10.0, 1, [0, 0.05, 0.1], [0.0, 0.05, 0.0], id="refills-at-the-rate"),
        pytest.param(2.0, 3, [0, 0, 0, 10, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0.5], id="refill-capped-at-burst"),
    ],
)
def test_token_bucket(rate: float, burst: int, script: list[float], expected: list[float]) -> None:
    ticks = Ticks()
    buckets = TokenBuckets(rate, burst, clock=ticks)
    waits = []
    for advance in script:
        ticks.t += advance
        waits.append(round(buckets.take("a"), 6))
    assert waits == expected


def test_retry_after_rounds_up() -> None:
    assert [retry_after(w) for w in (0.01, 1.0, 1.2)] == ["1", "1", "2"]


def test_submissions_beyond_a_users_rate_get_429_with_retry_after(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    rig = Rig(engine)
    settings = dataclasses.replace(Settings(config=SMALL, data_dir=tmp_path), submit_rate=0.01, submit_burst=2)
    app = create_app(rig.sessions, settings, None, rig.clock.now)
    client = TestClient(app)
    ben, chen = (issue(app.state.context, u).secret for u in ("ben", "chen"))

    def submit(secret: str) -> int:
        body = {"spec": {"budget": "pretrain", "command": ["train"]}}
        response = client.post("/jobs", json=body, headers={"Authorization": f"Bearer {secret}"})
        if response.status_code == 429:
            assert int(response.headers["Retry-After"]) >= 1
            assert response.json()["error"] == "rate_limited"
        return int(response.status_code)

    before = RATE_LIMITED._value.get()
    assert [submit(ben) for _ in range(3)] == [201, 201, 429]
    assert submit(chen) == 201  # another user has their own bucket
    assert client.get("/jobs", headers={"Authorization": f"Bearer {ben}"}).status_code == 200  # reads are not limited
    metrics = client.get("/metrics").text
    assert f"allotment_rate_limited_total {before + 1}" in metrics
