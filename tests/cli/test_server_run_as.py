"""`allot server --run-as`: a mode that cannot be honoured stops the server before it starts, with the reason, and
open login is refused in owner mode (it would let anyone run jobs as any account)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from allotment.cli.main import app
from tests.engine.rig import SMALL


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        pytest.param(["--run-as", "owners"], "run-as mode 'owners' is not one of: owner, single-user, auto", id="bad"),
        pytest.param(["--run-as", "owner", "--open-login"], "--open-login lets anyone act as any user: not in owner",
                     id="open-login-in-owner-mode"),
    ],
)  # fmt: skip
def test_the_server_refuses_to_start(tmp_path: Path, args: list[str], reason: str) -> None:
    if "owner" in args and os.geteuid() != 0:
        pytest.skip("owner mode as such needs root; without it the refusal is the privilege's")
    data = tmp_path / "data"
    result = CliRunner().invoke(app, ["server", "--config", str(SMALL), "--data-dir", str(data), *args])
    assert result.exit_code == 2, result.output
    assert reason in " ".join(result.output.split())
    assert not data.exists()
