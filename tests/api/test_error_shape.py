"""Every error the API answers — 400, 401, 403, 404, 405, 409, 413, 422, 429, 500 — has the one documented body
`{"error", "message", "problems": [{"field", "reason", "line"}]}` as JSON, including the ones Starlette raises itself
(an unknown path or static asset, a wrong method, an unreadable body) and unexpected failures, which answer 500
without their internals and are logged under the incident id the message gives. The OpenAPI description declares
that body for every error status of every operation."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from allotment.api import create_app
from allotment.config.limits import MAX_BODY_BYTES
from allotment.engine.setup import Settings
from allotment.service.tokens import issue
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.engine.rig import SMALL, Rig

LEAK = "the secret internals of /etc/allotment"


@dataclasses.dataclass
class Server:
    app: FastAPI
    client: TestClient
    tokens: dict[str, str]

    def headers(self, user: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}

    def submit(self, user: str, budget: str = "pretrain", request_id: str | None = None) -> httpx.Response:
        body: dict[str, object] = {"spec": {"budget": budget, "command": ["train"]}}
        if request_id is not None:
            body["request_id"] = request_id
        response: httpx.Response = self.client.post("/jobs", json=body, headers=self.headers(user))
        return response


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    rig = Rig(engine)
    settings = dataclasses.replace(Settings(config=SMALL, data_dir=tmp_path), submit_rate=0.001, submit_burst=2)
    app = create_app(rig.sessions, settings, None, rig.clock.now)

    def boom() -> None:
        raise RuntimeError(LEAK)

    app.add_api_route("/test-only/boom", boom, methods=["GET"])
    tokens = {u: issue(app.state.context, u).secret for u in ("ben", "chen", "eli")}
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Server(app, client, tokens)
    engine.dispose()


def _reused_request_id(s: Server) -> httpx.Response:
    s.submit("ben", request_id="once")
    body = {"spec": {"budget": "pretrain", "command": ["other"]}, "request_id": "once"}
    response: httpx.Response = s.client.post("/jobs", json=body, headers=s.headers("ben"))
    return response


def _rate_limited(s: Server) -> httpx.Response:
    for _ in range(2):
        s.submit("chen")
    return s.submit("chen")


Request = Callable[[Server], httpx.Response]
JSON = {"Content-Type": "application/json"}

NEW = [
    pytest.param(
        lambda s: s.client.post("/jobs", content="[" * 100_000, headers={**s.headers("ben"), **JSON}),
        400,
        "bad_request",
        id="400-unreadable-deep-json",
    ),
    pytest.param(lambda s: s.client.get("/no/such/endpoint", headers=s.headers("ben")), 404, "not_found", id="404"),
    pytest.param(lambda s: s.client.get("/ui/no-such-asset.js"), 404, "not_found", id="404-static-asset"),
    pytest.param(lambda s: s.client.delete("/jobs", headers=s.headers("ben")), 405, "method_not_allowed", id="405"),
    pytest.param(
        lambda s: s.client.post("/jobs", content=b"x" * (MAX_BODY_BYTES + 1), headers={**s.headers("ben"), **JSON}),
        413,
        "too_large",
        id="413",
    ),
    pytest.param(lambda s: s.client.get("/jobs?budget=%00", headers=s.headers("ben")), 422, "invalid", id="422-nul"),
    pytest.param(lambda s: s.client.get("/test-only/boom"), 500, "internal", id="500"),
]
"""Answers that were not in the shape before (plain text, or FastAPI's `{"detail": …}`)."""

KEPT = [
    pytest.param(
        lambda s: s.client.post("/jobs", json={"spec": {}, "yaml": ""}, headers=s.headers("ben")),
        400,
        "bad_request",
        id="400-spec-and-yaml",
    ),
    pytest.param(lambda s: s.client.get("/jobs"), 401, "unauthenticated", id="401"),
    pytest.param(lambda s: s.submit("eli"), 403, "forbidden", id="403"),
    pytest.param(lambda s: s.client.get("/jobs/j-none", headers=s.headers("ben")), 404, "not_found", id="404-job"),
    pytest.param(_reused_request_id, 409, "conflict", id="409"),
    pytest.param(lambda s: s.client.get("/jobs?limit=0", headers=s.headers("ben")), 422, "invalid", id="422"),
    pytest.param(_rate_limited, 429, "rate_limited", id="429"),
]
"""Answers already in the shape, kept so (guards)."""


def _assert_shape(response: httpx.Response, status: int, error: str) -> None:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "message", "problems"}, body
    assert body["error"] == error and isinstance(body["message"], str) and body["message"]
    assert all(set(p) == {"field", "reason", "line"} for p in body["problems"])


@pytest.mark.parametrize(("request_", "status", "error"), NEW)
def test_every_error_has_the_documented_shape(server: Server, request_: Request, status: int, error: str) -> None:
    _assert_shape(request_(server), status, error)


@pytest.mark.parametrize(("request_", "status", "error"), KEPT)
def test_errors_already_in_the_shape_stay_in_it(server: Server, request_: Request, status: int, error: str) -> None:
    _assert_shape(request_(server), status, error)


def test_an_unexpected_failure_is_logged_under_an_incident_id_and_leaks_nothing(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="allotment.api"):
        response = server.client.get("/test-only/boom")
    message = response.json()["message"]
    assert LEAK not in response.text and "RuntimeError" not in response.text and "Traceback" not in response.text
    [incident] = re.findall(r"incident ([0-9a-f]+)", message)
    [record] = [r for r in caplog.records if incident in r.getMessage()]
    assert record.exc_info is not None and LEAK in str(record.exc_info[1])


def test_the_openapi_declares_the_error_body_for_every_error_of_every_operation(server: Server) -> None:
    described = server.client.get("/openapi.json").json()
    missing: list[str] = []
    for path, operations in described["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if int(status) < 400 or (path, status) == ("/readyz", "503"):
                    continue
                schema = response.get("content", {}).get("application/json", {}).get("schema", {})
                if schema.get("$ref") != "#/components/schemas/ErrorBody":
                    missing.append(f"{method.upper()} {path} {status}")
            if path.startswith(("/jobs", "/plans", "/sessions")) and method == "post":
                for status in ("400", "401", "413", "422", "429", "500"):
                    if status not in operation["responses"]:
                        missing.append(f"{method.upper()} {path} {status} (undeclared)")
    assert not missing, missing
