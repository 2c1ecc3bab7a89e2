"""Fixtures for the integration tests: a real engine on a temporary data directory with the local executor, and
a Slurm test cluster of its own for the Slurm engine tests.

Owns: building engines with allotment.engine.setup.build and leaving no process or Slurm job behind; starting a
dedicated Slurm test cluster (scripts/slurm-cluster with ALLOT_SLURM_DIR=/tmp/allot-slurm-int, port 17100, 4
nodes), separate from the executor tests' cluster because these tests set nodes DOWN and DRAIN, which would end or
block the other tests' jobs when both run at once under pytest-xdist. Like tests/executors/slurm/conftest.py (whose
rules it follows): every xdist worker takes a lease, the last one out stops the cluster if the tests started it,
and under CI=true a cluster that cannot start fails the tests (locally they are skipped).
Must not: mock the executors, the store or Slurm.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from allotment.engine.fleet_sync import SyncedExecutor
from allotment.engine.setup import Built, Settings, build
from allotment.executors.slurm import SlurmExecutor
from tests.integration.support import SLURM_LOCAL, local_settings
from tests.slurm_cluster import leased_cluster

INT_DIR = Path(os.environ.get("ALLOT_SLURM_INT_DIR", "/tmp/allot-slurm-int"))
INT_PORT = os.environ.get("ALLOT_SLURM_INT_PORT", "17100")
INT_NODES = 4


def stop_everything(built: Built, timeout: float = 15.0) -> None:
    """End every attempt the engine's executor still runs (SIGKILL now) and wait until they are gone."""
    ex = built.engine.executor
    deadline = time.monotonic() + timeout
    while True:
        alive = ex.alive()
        if not alive or time.monotonic() > deadline:
            break
        for job_id, attempt in alive.items():
            ex.terminate(job_id, attempt, 0)
        ex.poll()
        time.sleep(0.2)
    inner = ex.inner if isinstance(ex, SyncedExecutor) else ex
    if isinstance(inner, SlurmExecutor):
        for rec in inner.store.open_records():
            if rec.slurm_id is not None:
                inner.cli.scancel(str(rec.slurm_id))
        inner.close()


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Built]:
    """An engine on examples/small with the local executor (4 virtual 8-GPU nodes on this host)."""
    built = build(local_settings(tmp_path / "data"))
    try:
        yield built
    finally:
        stop_everything(built)


# -- the Slurm cluster of the integration tests ----------------------------------------------------------------


@pytest.fixture(scope="session")
def int_slurm_conf() -> Iterator[str]:
    """slurm.conf of the integration tests' own cluster (nodes gpu01…gpu04, 8 fake GPUs each)."""
    env = {"ALLOT_SLURM_DIR": str(INT_DIR), "ALLOT_SLURM_PORT": INT_PORT}
    with leased_cluster(INT_DIR, env, "--nodes", str(INT_NODES)) as conf:
        yield conf


def slurm_settings(data_dir: Path, conf: str) -> Settings:
    return Settings(config=SLURM_LOCAL, data_dir=data_dir, executor="slurm", slurm_conf=Path(conf), fleet_sync_every=1)


@pytest.fixture
def slurm(int_slurm_conf: str, tmp_path: Path) -> Iterator[Built]:
    """An engine on examples/slurm-local with the Slurm executor on the integration cluster."""
    built = build(slurm_settings(tmp_path / "data", int_slurm_conf))
    try:
        yield built
    finally:
        stop_everything(built)
