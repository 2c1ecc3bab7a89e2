"""Fixtures for the Slurm executor tests: the real local cluster from scripts/slurm-cluster.

Owns: starting the cluster once per test session (every pytest-xdist worker takes a lease; the last one out stops
the cluster if the tests started it, and a cluster that was already running is left running), a fresh executor
state directory per test.
Must not: mock Slurm. Under CI=true a cluster that cannot start fails the tests; locally they are skipped.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from allotment.executors.slurm import SlurmExecutor

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "slurm-cluster"
CLUSTER_DIR = Path(os.environ.get("ALLOT_SLURM_DIR", "/tmp/allot-slurm"))


def _unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the Slurm test cluster is required under CI=true: {why}", pytrace=False)
    pytest.skip(f"no Slurm test cluster: {why}")


@contextmanager
def _locked() -> Iterator[None]:
    CLUSTER_DIR.mkdir(parents=True, exist_ok=True)
    with open(CLUSTER_DIR / ".test-lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _cluster(cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), cmd], capture_output=True, text=True, timeout=300, check=False, env=dict(os.environ)
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="session")
def slurm_conf() -> Iterator[str]:
    """Path of the running test cluster's slurm.conf (8 nodes gpu01…gpu08, 8 fake GPUs each)."""
    if os.geteuid() != 0:
        _unavailable("starting it needs root")
    leases = CLUSTER_DIR / "test-leases"
    marker = CLUSTER_DIR / "test-started"
    lease = leases / str(os.getpid())
    with _locked():
        was_running = _cluster("status").returncode == 0
        started = _cluster("start")
        if started.returncode != 0:
            _unavailable(f"scripts/slurm-cluster start failed:\n{started.stderr[-3000:]}")
        if not was_running:
            marker.touch()
        leases.mkdir(exist_ok=True)
        lease.touch()
    conf = started.stdout.strip().splitlines()[-1]
    try:
        yield conf
    finally:
        with _locked():
            lease.unlink(missing_ok=True)
            others = [p for p in leases.iterdir() if p.name.isdigit() and _pid_alive(int(p.name))]
            if not others and marker.exists():
                _cluster("stop")
                marker.unlink(missing_ok=True)


@pytest.fixture
def executor(slurm_conf: str, tmp_path: Path) -> Iterator[SlurmExecutor]:
    ex = SlurmExecutor(tmp_path / "state", slurm_conf)
    try:
        yield ex
    finally:
        # Leave nothing running on the shared cluster.
        for rec in ex.store.open_records():
            if rec.slurm_id is not None:
                ex.cli.scancel(str(rec.slurm_id))
        ex.close()
