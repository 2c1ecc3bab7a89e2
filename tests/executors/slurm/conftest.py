"""Fixtures for the Slurm executor tests: the real local cluster from scripts/slurm-cluster.

Owns: starting the cluster once per test session (every pytest-xdist worker takes a lease; the last one out stops
the cluster if the tests started it, and a cluster that was already running is left running), a fresh executor
state directory per test.
Must not: mock Slurm. Under CI=true a cluster that cannot start fails the tests; locally they are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from allotment.executors.slurm import SlurmExecutor
from tests.slurm_cluster import leased_cluster

CLUSTER_DIR = Path(os.environ.get("ALLOT_SLURM_DIR", "/tmp/allot-slurm"))


@pytest.fixture(scope="session")
def slurm_conf() -> Iterator[str]:
    """Path of the running test cluster's slurm.conf (8 nodes gpu01…gpu08, 8 fake GPUs each)."""
    with leased_cluster(CLUSTER_DIR) as conf:
        yield conf


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
