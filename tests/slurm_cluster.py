"""Sharing a real local Slurm test cluster (scripts/slurm-cluster) between pytest-xdist workers.

Owns: starting a cluster in a state directory under a file lock, one lease per worker process, and stopping it when
the last worker leaves — only if the tests started it (a cluster that was already running is left running).
Must not: mock Slurm. Under CI=true a cluster that cannot start fails the tests; locally they are skipped.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-cluster"


def unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the Slurm test cluster is required under CI=true: {why}", pytrace=False)
    pytest.skip(f"no Slurm test cluster: {why}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / ".test-lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_script(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **env}
    )


@contextmanager
def leased_cluster(state_dir: Path, env: Mapping[str, str] | None = None, *start_args: str) -> Iterator[str]:
    """The path of a running cluster's slurm.conf, held for this process until the block ends."""
    if os.geteuid() != 0:
        unavailable("starting it needs root")
    env = dict(env or {})
    leases, marker = state_dir / "test-leases", state_dir / "test-started"
    lease = leases / str(os.getpid())
    with _locked(state_dir):
        was_running = run_script(env, "status").returncode == 0
        started = run_script(env, "start", *start_args)
        if started.returncode != 0:
            unavailable(f"scripts/slurm-cluster start failed:\n{started.stderr[-3000:]}")
        if not was_running:
            marker.touch()
        leases.mkdir(exist_ok=True)
        lease.touch()
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        with _locked(state_dir):
            lease.unlink(missing_ok=True)
            others = [p for p in leases.iterdir() if p.name.isdigit() and pid_alive(int(p.name))]
            if not others and marker.exists():
                run_script(env, "stop")
                marker.unlink(missing_ok=True)
