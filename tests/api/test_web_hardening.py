"""Web hardening: the server answers only its own Host names (always with open login: DNS rebinding must not reach
a token), every response carries the security headers and a Content-Security-Policy, and /docs and /redoc load only
assets this server serves (no CDN); `allot server` serves plain HTTP beyond loopback only when told to."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from allotment.api import create_app
from allotment.cli.main import app
from allotment.engine.setup import Settings
from allotment.ops.hardening import allowed_hosts, host_of, is_loopback
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.engine.rig import SMALL, Rig


def client(tmp_path: Path, *, open_login: bool, hosts: Iterable[str] | None = None) -> TestClient:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    rig = Rig(engine)
    settings = Settings(config=SMALL, data_dir=tmp_path)
    app = create_app(rig.sessions, settings, None, rig.clock.now, open_login=open_login, allowed_hosts=hosts)
    return TestClient(app, base_url="http://127.0.0.1:8642")


@pytest.mark.parametrize(
    ("host", "status"),
    [
        pytest.param("127.0.0.1:8642", 201, id="loopback-address"),
        pytest.param("localhost:8642", 201, id="localhost"),
        pytest.param("[::1]:8642", 201, id="ipv6-loopback"),
        pytest.param("LOCALHOST", 201, id="case-insensitive-without-port"),
        pytest.param("rebind.attacker.example:8642", 400, id="dns-rebinding-name"),
        pytest.param("127.0.0.1.attacker.example", 400, id="lookalike"),
        pytest.param("", 400, id="empty"),
    ],
)
def test_open_login_answers_only_loopback_host_names(tmp_path: Path, host: str, status: int) -> None:
    http = client(tmp_path, open_login=True)
    response = http.post("/auth/login", json={"user": "ada"}, headers={"Host": host})
    assert response.status_code == status, response.text
    if status == 400:
        body = response.json()
        assert body["error"] == "bad_request" and body["problems"][0]["field"] == "Host"
        assert "--allowed-host" in body["message"]
        assert "secret" not in response.text


@pytest.mark.parametrize(
    ("bound", "extra", "host", "allowed"),
    [
        pytest.param("127.0.0.1", (), "127.0.0.1:8642", True, id="bound-address"),
        pytest.param("127.0.0.1", (), "allot.example.org", False, id="unconfigured-name"),
        pytest.param("127.0.0.1", ("allot.example.org",), "allot.example.org", True, id="configured-proxy-name"),
        pytest.param("10.0.0.5", (), "10.0.0.5:8642", True, id="bound-lan-address"),
        pytest.param("10.0.0.5", (), "evil.example", False, id="foreign-on-lan"),
        pytest.param("0.0.0.0", (), f"{socket.gethostname()}:8642", True, id="wildcard-answers-this-machines-name"),
        pytest.param("0.0.0.0", (), "evil.example", False, id="wildcard-refuses-foreign-names"),
    ],
)
def test_the_allowlist_is_the_bound_host_loopback_and_configured_names(
    tmp_path: Path, bound: str, extra: tuple[str, ...], host: str, allowed: bool
) -> None:
    hosts = allowed_hosts(bound, extra)
    assert (host_of(host) in hosts) is allowed
    http = client(tmp_path, open_login=False, hosts=hosts)
    assert (http.get("/health", headers={"Host": host}).status_code == 200) is allowed


def test_loopback_binds_are_recognised() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "127.0.1.1", "localhost", "::1", "[::1]")] == [True] * 5
    assert [is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "allot.example.org")] == [False] * 4


def test_open_login_refuses_a_wildcard_allowlist(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="open login"):
        client(tmp_path, open_login=True, hosts=["*"])


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/", id="dashboard-page"),
        pytest.param("/ui/app.js", id="dashboard-script"),
        pytest.param("/health", id="api-json"),
        pytest.param("/auth/me", id="api-error"),
    ],
)
def test_every_response_has_the_security_headers_and_a_strict_policy(tmp_path: Path, path: str) -> None:
    response = client(tmp_path, open_login=False).get(path)
    headers = response.headers
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    csp = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
    assert csp["script-src"] == "'self'"  # no inline script, no other origin
    assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'" and csp["default-src"] == "'self'"


@pytest.mark.parametrize("page", [pytest.param("/docs", id="swagger-ui"), pytest.param("/redoc", id="redoc")])
def test_the_api_docs_load_only_assets_this_server_serves(tmp_path: Path, page: str) -> None:
    http = client(tmp_path, open_login=False)
    html = http.get(page)
    assert html.status_code == 200 and "content-security-policy" in html.headers
    assert "script-src 'self';" in html.headers["content-security-policy"]
    assert "<script>" not in html.text.replace(" ", "")  # no inline script: every script is a file
    assets = re.findall(r'(?:src|href|spec-url)="([^"]+)"', html.text)
    assert assets and all(a.startswith("/") and not a.startswith("//") for a in assets), assets
    for asset in assets:
        served = http.get(asset)
        assert served.status_code == 200 and len(served.content) > 0, asset
    assert "SwaggerUIBundle" in http.get("/docs/init.js").text or page == "/redoc"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        pytest.param(["--host", "0.0.0.0"], ("plain HTTP", "--allow-remote-http", "TLS"), id="wildcard-needs-a-flag"),
        pytest.param(["--host", "10.0.0.5"], ("plain HTTP",), id="lan-address-needs-a-flag"),
        pytest.param(["--host", "0.0.0.0", "--open-login", "--allow-remote-http"], ("loopback",), id="open-login"),
        pytest.param(["--open-login", "--allowed-host", "*"], ("'*'",), id="open-login-with-any-host"),
    ],
)
def test_the_server_refuses_to_serve_plain_http_beyond_loopback_unless_told(
    tmp_path: Path, args: list[str], words: tuple[str, ...]
) -> None:
    result = CliRunner().invoke(app, ["server", "--config", str(SMALL), "--data-dir", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    for word in words:
        assert word in result.output
    assert not (tmp_path / "allotment.db").exists()  # refused before anything was created
