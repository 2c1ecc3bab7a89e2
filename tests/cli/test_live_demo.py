"""`allot demo --no-wait`: the README's run command, end to end in a real process: a server with a virtual fleet,
the scripted workload through the SDK, and what it shows (starts, a preemption at a slice end, a session starting
in a full cluster, budgets), then an orderly exit that leaves no job process behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_demo_runs_its_script_and_exits(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    env = {**os.environ, "COLUMNS": "200", "ALLOT_URL": "", "ALLOT_TOKEN": ""}
    done = subprocess.run(
        [sys.executable, "-m", "allotment.cli", "demo", "--no-wait", "--data-dir", str(data)],
        cwd=tmp_path,  # the demo finds examples/demo next to the package's checkout
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "▶ started pretrain-a" in out and "▶ started detect-gang" in out
    assert "⚡ preempting pretrain-" in out and "its slice has ended and detect-gang has a planned start" in out
    assert "▶ session eli-notebook" in out and "the session was ready" in out
    assert "Budgets after the demo" in out and "Summary:" in out
    assert "gave up waiting" not in out
    alive = subprocess.run(["pgrep", "-f", str(data)], capture_output=True, text=True, check=False)
    assert alive.stdout.strip() == "", "job processes outlived the demo"
