"""Fixtures for the side-by-side tests: the accounting-mode Slurm cluster and one 2-minute replay of both runs.

Owns: leasing a Slurm cluster of its own in accounting mode (ALLOT_SLURM_DIR=/tmp/allot-slurm-sbs, port 17200, 8
nodes: slurmdbd against the MariaDB on 127.0.0.1:3306; under CI=true a missing Slurm or MariaDB fails the tests,
locally they are skipped) and running benchmarks.sidebyside's quick version in it (test_sidebyside_run.py uses it
once).
Must not: mock Slurm, MariaDB or the engine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.sidebyside.run import run_both
from benchmarks.sidebyside.workload import QUICK

from tests.slurm_cluster import leased_cluster

SBS_DIR = Path(os.environ.get("ALLOT_SLURM_SBS_DIR", "/tmp/allot-slurm-sbs"))
SBS_PORT = os.environ.get("ALLOT_SLURM_SBS_PORT", "17200")


@pytest.fixture
def sbs_run(tmp_path: Path) -> Iterator[Path]:
    """The working directory of one quick side-by-side run (report.json, and per run run.json + events.jsonl)."""
    workdir = tmp_path / "sidebyside"
    env = {"ALLOT_SLURM_DIR": str(SBS_DIR), "ALLOT_SLURM_PORT": SBS_PORT}
    with leased_cluster(SBS_DIR, env, "--nodes", "8", mode="accounting") as conf:
        run_both(conf, QUICK, workdir, timeout=8 * QUICK.span_seconds)
    yield workdir


def report(workdir: Path) -> list[dict[str, object]]:
    data = json.loads((workdir / "report.json").read_text())
    assert isinstance(data, list)
    return data
