"""Fixtures for the client commands' tests: a live server (SQLite, examples/small, local executor, API with open
login) per test module, and `allot` invoked as a real command line against it, as a given user."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from allotment.cli.main import app
from tests.sdk.live import LiveServer, live_server


@dataclass
class Allot:
    """Runs `allot ARGS…` in-process (Typer's runner) with ALLOT_URL / ALLOT_TOKEN of a user of `live`."""

    live: LiveServer
    config_home: Path

    def env(self, user: str | None) -> dict[str, str | None]:
        return {
            "ALLOT_URL": self.live.url,
            "ALLOT_TOKEN": self.live.tokens[user] if user else None,
            "XDG_CONFIG_HOME": str(self.config_home),
            "ALLOT_CONFIG": None,
            "COLUMNS": "200",
        }

    def __call__(
        self, user: str | None, *args: str, code: int = 0, env: Mapping[str, str | None] | None = None
    ) -> Result:
        result = CliRunner().invoke(app, list(args), env={**self.env(user), **(env or {})})
        assert result.exit_code == code, f"allot {' '.join(args)} → {result.exit_code}\n{result.output}"
        return result

    def json(self, user: str | None, *args: str, env: Mapping[str, str | None] | None = None) -> Any:
        """`allot ARGS… --json` (the flag goes before a `--`), parsed."""
        at = args.index("--") if "--" in args else len(args)
        return json.loads(self(user, *args[:at], "--json", *args[at:], env=env).stdout)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("cli") / "data") as server:
        yield server


@pytest.fixture
def allot(live: LiveServer, tmp_path: Path) -> Allot:
    return Allot(live, tmp_path / "config")
