"""The Slurm executor asks Slurm for the CPUs and memory a run holds on each node (decision 60): one task per node
runs every replica placed there, so `--cpus-per-task` and `--mem` (in MiB) are the node's share placement counted;
a job that asks for neither passes neither, and Slurm's own defaults apply as before. The argument test needs no
cluster; the last test runs a job on the real local cluster (tests/slurm_cluster.py: 16 CPUs per node)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from allotment.executors.slurm import SlurmExecutor
from allotment.executors.slurm.script import sbatch_args

from .helpers import ended, final, spec, wait_for


@pytest.mark.parametrize(
    ("cpus", "memory", "present", "absent"),
    [
        pytest.param(16, 65536, ["--cpus-per-task=16", "--mem=65536M"], [], id="cpus-and-memory"),
        pytest.param(4, 0, ["--cpus-per-task=4"], ["--mem"], id="cpus-only"),
        pytest.param(0, 2048, ["--mem=2048M"], ["--cpus-per-task"], id="memory-only"),
        pytest.param(0, 0, [], ["--cpus-per-task", "--mem"], id="no-request"),
    ],
)
def test_sbatch_asks_for_the_cpus_and_memory_per_node(
    cpus: int, memory: int, present: list[str], absent: list[str]
) -> None:
    s = replace(spec("res-1", ["true"], ["gpu01", "gpu02"], gpus=8), cpus=cpus, memory=memory)
    args = sbatch_args(s, "allot.res-1", "/tmp/out")
    for arg in present:
        assert arg in args
    for prefix in absent:
        assert not any(a.startswith(prefix) for a in args), args
    assert "--ntasks-per-node=1" in args and "--gres=gpu:8" in args


def test_a_task_gets_the_cpus_it_asked_for(executor: SlurmExecutor, tmp_path: Path) -> None:
    out = tmp_path / "cpus.json"
    program = (
        "import json, os, sys; json.dump({'per_task': os.environ.get('SLURM_CPUS_PER_TASK'), "
        "'cores': len(os.sched_getaffinity(0))}, open(sys.argv[1], 'w'))"
    )
    s = replace(spec("cpus-1", [sys.executable, "-c", program, str(out)], ["gpu05"], gpus=1), cpus=4)
    executor.launch(s)
    events = wait_for(executor, ended("cpus-1"))
    assert final(events, "cpus-1").exit_code == 0
    seen = json.loads(out.read_text())
    assert seen["per_task"] == "4"
