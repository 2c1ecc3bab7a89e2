"""Sharing a real local Slurm test cluster (scripts/slurm-cluster) between pytest-xdist workers.

Owns: starting a cluster in a state directory under a file lock, one lease per worker process, and stopping it when
the last worker leaves — only if the tests started it (a cluster that was already running is left running). A lease
names the cluster's mode (`plain`, the default, or `accounting`: slurmdbd + MariaDB + Fair Tree, see
docs/sidebyside.md); a cluster running in the other mode is restarted in the one asked for once no other process
holds a lease on it, and when the last lease ends, a cluster the tests did not start is restarted in its old mode,
so a working cluster is left behind as it was found.
Must not: mock Slurm. Under CI=true a cluster that cannot start fails the tests; locally they are skipped.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.leftovers import end, slurm_jobs, stray_slurm_steps

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-cluster"
LEASED_CONFS: set[str] = set()
"""slurm.conf paths of the clusters this process leased: tests/conftest.py looks for their stray slurmstepds."""


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


def _mode(state_dir: Path) -> str:
    path = state_dir / "mode"
    return path.read_text().strip() if path.exists() else "plain"


def _live_leases(leases: Path) -> list[Path]:
    if not leases.is_dir():
        return []
    return [p for p in leases.iterdir() if p.name.isdigit() and pid_alive(int(p.name))]


@contextmanager
def leased_cluster(
    state_dir: Path,
    env: Mapping[str, str] | None = None,
    *start_args: str,
    mode: str = "plain",
    wait_for_mode: float = 600.0,
) -> Iterator[str]:
    """The path of a running cluster's slurm.conf in `mode`, held for this process until the block ends."""
    if os.geteuid() != 0:
        unavailable("starting it needs root")
    env = dict(env or {})
    leases, marker = state_dir / "test-leases", state_dir / "test-started"
    restore = state_dir / "test-restore-mode"
    lease = leases / str(os.getpid())
    deadline = time.monotonic() + wait_for_mode
    while True:
        with _locked(state_dir):
            was_running = run_script(env, "status").returncode == 0
            blocked = False  # running in the other mode and leased: wait for its holders to leave
            if was_running and _mode(state_dir) != mode:
                if not _live_leases(leases):
                    if not marker.exists() and not restore.exists():
                        restore.write_text(_mode(state_dir))
                    run_script(env, "stop")
                    was_running = False
                elif time.monotonic() > deadline:
                    unavailable(f"the cluster in {state_dir} stayed leased in {_mode(state_dir)} mode")
                else:
                    blocked = True
            if not blocked:
                started = run_script(env, "start", *start_args, "--mode", mode)
                if started.returncode != 0:
                    unavailable(f"scripts/slurm-cluster start failed:\n{started.stderr[-3000:]}")
                if not was_running and not restore.exists():
                    marker.touch()
                leases.mkdir(exist_ok=True)
                lease.touch()
                break
        time.sleep(1.0)
    conf = started.stdout.strip().splitlines()[-1]
    LEASED_CONFS.add(conf)
    try:
        yield conf
    finally:
        with _locked(state_dir):
            lease.unlink(missing_ok=True)
            if not _live_leases(leases):
                if marker.exists():
                    run_script(env, "stop")
                    marker.unlink(missing_ok=True)
                elif restore.exists():
                    old = restore.read_text().strip()
                    nodes = (state_dir / "nodes").read_text().strip()
                    run_script(env, "stop")
                    run_script(env, "start", "--nodes", nodes, "--mode", old)
                    restore.unlink(missing_ok=True)


def end_steps(conf: str, timeout: float = 30.0) -> list[int]:
    """For a cluster a test owns, after it cancelled every job: wait (up to `timeout` s) until the cluster has no
    job left, then SIGKILL every slurmstepd still running for it — a step whose node was set DOWN, or whose slurmd
    or controller went away under it, outlives its job, and it ignores SIGTERM. Returns the pids it ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not slurm_jobs(conf):  # none left, or the cluster does not answer
            break
        time.sleep(0.5)
    strays = stray_slurm_steps([conf], every=True)
    end(strays)
    return [s.pid for s in strays]
