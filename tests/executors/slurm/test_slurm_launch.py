"""The Slurm executor launches exactly what it is told, where it is told, on the real local cluster.

Covers: a pinned 1-node job runs on the chosen node with the requested GPU count; a 2-node gang runs one task on
each chosen node; arguments and environment values full of shell syntax arrive verbatim; exit codes are
reported; launch is idempotent; invalid specs are refused before anything reaches Slurm.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from allotment.core.model import Allocation
from allotment.executors.slurm import SlurmExecutor
from allotment.ports.executor import EventKind, LaunchSpec

from .helpers import ended, final, kinds, spec, wait_for

REPORT = (
    "import json, os, sys, time; print(json.dumps({k: os.environ.get(k) for k in sys.argv[1:]}), flush=True); "
    "time.sleep(2)"  # seen running: Slurm forgets a job's GPU indices once it ends
)


def _reports(path: Path) -> list[dict[str, str | None]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_pinned_job_runs_on_the_chosen_node_with_its_gpus(executor: SlurmExecutor) -> None:
    keys = ["SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES", "ALLOT_JOB_ID", "ALLOT_ATTEMPT", "ALLOT_GPUS"]
    s = spec("pin-1", [sys.executable, "-c", REPORT, *keys], nodes=["gpu01"], gpus=3)
    executor.launch(s)
    events = wait_for(executor, ended("pin-1"))

    assert kinds(events, "pin-1") == [EventKind.STARTED, EventKind.EXITED]
    assert final(events, "pin-1").exit_code == 0
    [report] = _reports(executor.output_path("pin-1", 0))
    assert report["SLURMD_NODENAME"] == "gpu01"
    assert len((report["CUDA_VISIBLE_DEVICES"] or "").split(",")) == 3
    assert report["ALLOT_JOB_ID"] == "pin-1"
    assert report["ALLOT_ATTEMPT"] == "0"
    assert report["ALLOT_GPUS"] == "3"
    placement = executor.placement("pin-1", 0)
    assert placement is not None
    assert [a.node for a in placement] == ["gpu01"]
    assert len(placement[0].gpus) == 3


def test_gang_runs_one_task_on_each_chosen_node(executor: SlurmExecutor) -> None:
    keys = ["SLURMD_NODENAME", "ALLOT_NODE", "ALLOT_REPLICA", "ALLOT_REPLICAS", "CUDA_VISIBLE_DEVICES"]
    s = spec("gang-1", [sys.executable, "-c", REPORT, *keys], nodes=["gpu03", "gpu02"], gpus=2)
    executor.launch(s)
    events = wait_for(executor, ended("gang-1"))

    assert final(events, "gang-1").exit_code == 0
    reports = sorted(_reports(executor.output_path("gang-1", 0)), key=lambda r: str(r["SLURMD_NODENAME"]))
    assert [r["SLURMD_NODENAME"] for r in reports] == ["gpu02", "gpu03"]
    assert [r["ALLOT_NODE"] for r in reports] == ["gpu02", "gpu03"]
    # Replica ranks follow Allotment's placement order, not Slurm's sorted host list.
    assert [r["ALLOT_REPLICA"] for r in reports] == ["1", "0"]
    assert all(r["ALLOT_REPLICAS"] == "2" for r in reports)
    assert all(len((r["CUDA_VISIBLE_DEVICES"] or "").split(",")) == 2 for r in reports)
    placement = executor.placement("gang-1", 0)
    assert placement is not None
    assert sorted(a.node for a in placement) == ["gpu02", "gpu03"]


def test_arguments_and_environment_arrive_verbatim(executor: SlurmExecutor, tmp_path: Path) -> None:
    nasty = [
        'it\'s "quoted"',
        "a; touch " + str(tmp_path / "pwned1"),
        "$(touch " + str(tmp_path / "pwned2") + ")",
        "`touch " + str(tmp_path / "pwned3") + "`",
        "line one\nline two\n",
        "$HOME ${PATH} * ? [a] ~ \\ | & > <",
        "",
        "-n",
    ]
    out = tmp_path / "argv.json"
    program = (
        "import json, os, sys; json.dump({'argv': sys.argv[2:], 'env': os.environ['NASTY']}, open(sys.argv[1], 'w'))"
    )
    env = {"NASTY": "x'; $(touch " + str(tmp_path / "pwned4") + ") `y`\nz"}
    executor.launch(spec("args-1", [sys.executable, "-c", program, str(out), *nasty], ["gpu04"], env=env))
    events = wait_for(executor, ended("args-1"))

    assert final(events, "args-1").exit_code == 0
    got = json.loads(out.read_text())
    assert got["argv"] == nasty
    assert got["env"] == env["NASTY"]
    assert not any((tmp_path / f"pwned{i}").exists() for i in range(1, 5))


def test_exit_codes_are_reported(executor: SlurmExecutor) -> None:
    executor.launch(spec("exit-3", ["bash", "-c", "exit 3"], ["gpu01"]))
    executor.launch(spec("exit-0", ["true"], ["gpu01"], gpus=0))
    events = wait_for(executor, lambda ev: ended("exit-3")(ev) and ended("exit-0")(ev))

    assert final(events, "exit-3").kind is EventKind.EXITED
    assert final(events, "exit-3").exit_code == 3
    assert final(events, "exit-0").exit_code == 0
    assert executor.poll() == []  # each event once


def test_launch_is_idempotent_per_attempt(executor: SlurmExecutor) -> None:
    s = spec("idem-1", ["sleep", "30"], ["gpu02"])
    executor.launch(s)
    first = executor.slurm_job_id("idem-1", 0)
    executor.launch(s)
    assert executor.slurm_job_id("idem-1", 0) == first
    names = executor.cli.run(["squeue", "-h", "-t", "all", "-o", "%j"]).split()
    assert names.count(executor.store.get("idem-1", 0).name) == 1  # type: ignore[union-attr]

    # A crash after sbatch answered but before the answer was recorded: the job is found again by name.
    rec = executor.store.get("idem-1", 0)
    assert rec is not None
    executor.store.update(rec, slurm_id=None, phase="submitting")
    executor.launch(s)
    assert executor.slurm_job_id("idem-1", 0) == first
    executor.terminate("idem-1", 0, grace=0)
    wait_for(executor, ended("idem-1"))


@pytest.mark.parametrize(
    "bad",
    [
        LaunchSpec(
            "bad-1", 0, ("true",), (Allocation("gpu01", (0,)), Allocation("gpu02", (0, 1))), "b", "u", "batch", 5, None
        ),
        LaunchSpec(
            "bad-2", 0, ("true",), (Allocation("gpu01", (0,)),), "b", "u", "batch", 5, None, env={"NOT A NAME": "x"}
        ),
        LaunchSpec("bad-3", 0, (), (Allocation("gpu01", (0,)),), "b", "u", "batch", 5, None),
        LaunchSpec(
            "bad-4", 0, ("true",), (Allocation("gpu01", (0,)), Allocation("gpu01", (1,))), "b", "u", "batch", 5, None
        ),
    ],
)
def test_invalid_specs_are_refused_before_reaching_slurm(executor: SlurmExecutor, bad: LaunchSpec) -> None:
    with pytest.raises(ValueError):
        executor.launch(bad)
    assert executor.store.get(bad.job_id, 0) is None
    assert executor.alive() == {}
