"""Defaults that follow the server's policy: an omitted slice or grace takes the policy's default clamped to its
limits (filled by the server, echoed in the submission), for `allot run`, `POST /jobs` and `POST /sessions`; explicit
values over a limit are still refused with 422 naming the field and the limit. Against real servers on the demo's
policy (max_slice 10m, max_grace 30s) and on one whose longest grace is shorter than any client's old default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from allotment.cli.main import app
from tests.cli.conftest import Allot
from tests.sdk.live import ROOT, LiveServer, live_server

DEMO = ROOT / "examples" / "demo" / "allotment.yaml"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The demo's own configuration, as `allot demo` serves it."""
    with live_server(tmp_path_factory.mktemp("demo") / "data", config=DEMO) as server:
        yield server


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The demo's configuration with a longest grace of 10 s: shorter than the 30 s every session used to ask for."""
    text = DEMO.read_text("utf-8")
    assert "  max_grace: 30s\n" in text
    config = tmp_path_factory.mktemp("short") / "allotment.yaml"
    config.write_text(text.replace("  max_grace: 30s\n", "  max_grace: 10s\n"), "utf-8")
    with live_server(config.parent / "data", config=config) as server:
        yield server


def post(server: LiveServer, user: str, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.tokens[user]}"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        return http.post(path, json=body, headers=headers)


def job(server: LiveServer, user: str, job_id: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {server.tokens[user]}"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.get(f"/jobs/{job_id}", headers=headers)
    response.raise_for_status()
    detail: dict[str, Any] = response.json()
    return detail


def test_the_demos_suggested_run_takes_the_policys_defaults(allot: Allot) -> None:
    result = allot("ben", "run", "--gpus", "4", "--budget", "pretrain", "--", "python", "-c", "print(42)")
    said = " ".join(result.stdout.split())  # Rich wraps at the terminal's width, which differs under xdist
    assert "submitted" in said and "slice 10m00s" in said and "grace 30s" in said
    echoed = allot.json("ben", "run", "--gpus", "4", "--budget", "pretrain", "--", "python", "-c", "print(42)")
    # default_slice 1 h clamped to max_slice 10 m; default_grace 60 s capped at max_grace 30 s
    assert (echoed["job"]["slice_seconds"], echoed["job"]["grace"]) == (600, 30)
    for job_id in (echoed["job"]["id"], said.split("submitted ", 1)[1].split()[0]):
        done = CliRunner().invoke(app, ["cancel", job_id], env=allot.env("ben"))  # print(42) may be done: exit 5
        assert done.exit_code in (0, 5), done.output


def test_run_help_says_where_the_defaults_come_from(allot: Allot) -> None:
    shown = " ".join(allot(None, "run", "--help").stdout.split())
    assert "--slice" in shown and "--grace" in shown and "server's policy" in shown


@pytest.mark.parametrize(
    ("path", "body", "field", "limit"),
    [
        pytest.param(
            "/jobs", {"spec": {"budget": "pretrain", "command": ["x"], "grace": "1m"}}, "grace", "(30s)", id="job-grace"
        ),
        pytest.param(
            "/jobs",
            {"spec": {"budget": "pretrain", "command": ["x"], "contract": {"slice": "1h"}}},
            "contract.slice",
            "600s",
            id="job-slice",
        ),
        pytest.param("/sessions", {"budget": "detection", "grace": "2m"}, "grace", "(30s)", id="session-grace"),
        pytest.param(
            "/sessions", {"budget": "detection", "length": "2h"}, "contract.slice", "3600s", id="session-length"
        ),
    ],
)
def test_explicit_values_over_a_limit_are_refused(
    live: LiveServer, path: str, body: dict[str, Any], field: str, limit: str
) -> None:
    response = post(live, "eli" if path == "/sessions" else "ben", path, body)
    assert response.status_code == 422, response.text
    [problem] = response.json()["problems"]
    assert problem["field"] == field and limit in problem["reason"]


def test_an_explicit_grace_over_the_limit_fails_the_cli_naming_it(allot: Allot) -> None:
    result = allot("ben", "run", "--budget", "pretrain", "--grace", "1m", "--", "true", code=2)
    assert "grace" in result.stderr and "30s" in result.stderr


def test_a_session_against_a_short_longest_grace_is_accepted(short: LiveServer, tmp_path: Path) -> None:
    response = post(short, "eli", "/sessions", {"budget": "detection", "gpus": 1})
    assert response.status_code == 201, response.text
    detail = job(short, "eli", response.json()["job"]["id"])
    assert (detail["grace"], detail["slice_seconds"]) == (10, 3600)  # capped at max_grace; the session's 1 h default
    asked = post(short, "eli", "/sessions", {"budget": "detection", "gpus": 1, "grace": "5s", "length": "5m"})
    assert asked.status_code == 201, asked.text
    assert (job(short, "eli", asked.json()["job"]["id"])["grace"], asked.json()["job"]["kind"]) == (5, "session")
    allot = Allot(short, tmp_path / "config")
    cli = allot.json("eli", "session", "--budget", "detection", "--no-wait")
    assert job(short, "eli", cli["job"]["id"])["grace"] == 10
    ids = [response.json()["job"]["id"], asked.json()["job"]["id"], cli["job"]["id"]]
    allot("eli", "cancel", *ids)
