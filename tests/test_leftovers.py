"""The session-end check of tests/conftest.py: a run whose test leaves a process behind fails and the process is
ended; a clean run passes. Each case runs a small pytest session of its own in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

INNER_CONFTEST = "from tests.conftest import pytest_sessionfinish\n\n__all__ = ['pytest_sessionfinish']\n"

CASES = {
    "clean": "def test_it(tmp_path):\n    subprocess.run(['true'], check=True)\n",
    "a-child-left-running": (
        "def test_it(tmp_path):\n"
        "    p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "    (tmp_path / 'pid').write_text(str(p.pid))\n"
    ),
    "an-orphan-in-the-tmp-dir": (  # re-parented to init: found by its working directory
        "def test_it(tmp_path):\n"
        "    subprocess.run(['sh', '-c', 'sleep 300 & echo $! > pid'], cwd=tmp_path, start_new_session=True)\n"
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_session_that_leaves_a_process_fails_and_the_process_is_ended(tmp_path: Path, case: str) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "conftest.py").write_text(INNER_CONFTEST)
    (inner / "test_inner.py").write_text("import subprocess\n\n\n" + CASES[case])
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            f"--basetemp={tmp_path / 'base'}",
            f"--rootdir={inner}",
            "-c",
            os.devnull,
            str(inner),
        ],
        cwd=inner,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ALLOT_ALLOW_LEFTOVERS": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    pids = [int(p.read_text()) for p in (tmp_path / "base").rglob("pid")]
    if case == "clean":
        assert run.returncode == 0, run.stdout + run.stderr
        assert pids == []
        return
    assert run.returncode == 1, run.stdout + run.stderr
    assert "processes left behind" in run.stdout and "sleep 300" in run.stdout
    [pid] = pids
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] in "ZX"
