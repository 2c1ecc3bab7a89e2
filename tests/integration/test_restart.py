"""An engine process killed with SIGKILL while jobs run, then restarted on the same data directory (a new build):
running jobs are found again, not relaunched, and exits that happened while it was down are recorded with their
codes — with the local executor and with Slurm."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from allotment.engine.fleet_sync import SyncedExecutor
from allotment.engine.setup import Built, Settings, build
from allotment.executors.local import LocalExecutor
from allotment.executors.local import supervisor as sv
from allotment.executors.slurm import SlurmCli, SlurmExecutor
from tests.integration.conftest import slurm_settings, stop_everything
from tests.integration.support import (
    PY,
    ROOT,
    WAIT_THEN_EXIT,
    add_job,
    job,
    launches,
    local_settings,
    running,
    runs,
    wait_until,
)

BUDGETS = {
    "local": [("pretrain", "ben"), ("finetune", "chen"), ("detection", "dana")],
    "slurm": [("physics", "ben"), ("biology", "chen"), ("physics", "ada")],
}


def _identity(built: Built, job_id: str) -> object:
    """What identifies the running process of attempt 0: its process group (local) or Slurm job id."""
    ex = built.engine.executor
    if isinstance(ex, LocalExecutor):
        record = sv.read_json(ex.attempt_dir(job_id, 0) / sv.JOB)
        assert record is not None
        return record["pgid"]
    assert isinstance(ex, SyncedExecutor) and isinstance(ex.inner, SlurmExecutor)
    return ex.inner.slurm_job_id(job_id, 0)


def _ended_while_down(settings: Settings, built: Built, job_ids: list[str]) -> bool:
    ex = built.engine.executor
    if isinstance(ex, LocalExecutor):
        return all((ex.attempt_dir(j, 0) / sv.EXIT).exists() for j in job_ids)
    assert isinstance(ex, SyncedExecutor) and isinstance(ex.inner, SlurmExecutor)
    cli = SlurmCli(conf=str(settings.slurm_conf))
    ids = [ex.inner.slurm_job_id(j, 0) for j in job_ids]
    states = [cli.run(["squeue", "-h", "-t", "all", "-j", str(i), "-o", "%T"], check=False).strip() for i in ids]
    return all(s in ("COMPLETED", "FAILED") for s in states)


@pytest.mark.parametrize("kind", ["local", "slurm"])
def test_engine_killed_and_restarted_finds_running_jobs_and_records_exits(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    if kind == "local":
        settings = local_settings(data)
    else:
        settings = slurm_settings(data, request.getfixturevalue("int_slurm_conf"))
    first = build(settings)  # migrates and seeds; the worker below is the engine that gets killed
    go = tmp_path / "go"
    (b1, u1), (b2, u2), (b3, u3) = BUDGETS[kind]
    long = add_job(first, b1, u1, ["sleep", "300"], 1)
    exits7 = add_job(first, b2, u2, [PY, "-c", WAIT_THEN_EXIT, str(go), "7"], 1)
    exits0 = add_job(first, b3, u3, [PY, "-c", WAIT_THEN_EXIT, str(go), "0"], 1)
    argv = [PY, "-m", "tests.integration.engine_worker", str(settings.config), str(data), settings.executor]
    worker = subprocess.Popen([*argv, str(settings.slurm_conf or "")], cwd=ROOT)
    restarted: Built | None = None
    try:
        try:
            wait_until(running(first, long, exits7, exits0), timeout=60, what="the engine process to start the jobs")
        finally:
            worker.kill()  # SIGKILL: no clean-up of any kind
            worker.wait()
        identity = _identity(first, long)
        go.touch()  # two jobs exit while no engine runs
        wait_until(lambda: _ended_while_down(settings, first, [exits7, exits0]), what="the jobs to exit")

        restarted = build(settings)
        restarted.engine.reconcile()
        restarted.engine.step()

        assert job(restarted, long).state == "running"
        assert [r.ended_at for r in runs(restarted, long)] == [None]
        assert restarted.engine.executor.alive().get(long) == 0
        assert _identity(restarted, long) == identity  # the same process / Slurm job, found again
        assert launches(restarted, long) == 1  # not relaunched
        assert job(restarted, exits7).state == "failed"
        assert [r.exit_code for r in runs(restarted, exits7)] == [7]
        assert job(restarted, exits0).state == "completed"
        assert [r.exit_code for r in runs(restarted, exits0)] == [0]
    finally:
        if worker.poll() is None:
            worker.kill()
        stop_everything(restarted or first)
        if restarted is not None:
            stop_everything(first)
