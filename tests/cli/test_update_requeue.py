"""`allot update` (scontrol update job) against a running server: a held job's priority, GPUs, time limit, slice and
GPU types are changed with each field's before → after shown, the engine starts it as updated, a refused update
changes nothing, and refusals exit with the documented codes."""

from __future__ import annotations

from tests.cli.conftest import Allot
from tests.sdk.live import wait_for


def state(allot: Allot, job_id: str) -> str:
    return str(allot.json("ada", "status", job_id)["state"])


def test_a_pending_job_is_updated_and_starts_as_updated(allot: Allot) -> None:
    args = ("run", "--budget", "pretrain", "--gpus", "8", "--name", "to-update", "--hold")
    job = str(allot.json("chen", *args, "--", "sleep", "600")["job"]["id"])
    shown = allot("chen", "update", job, "--priority", "5", "--gpus", "2", "--time", "2:00:00", "--slice", "45m",
                  "--gpu-types", "H100").stdout  # fmt: skip
    assert f"{job} updated" in shown
    assert "priority: 0 → 5" in shown and "gpus: 8 → 2" in shown
    assert "max_runtime: none → 2h00m" in shown and "slice: 1h00m → 45m00s" in shown
    assert "gpu_types: any → H100" in shown
    status = allot.json("chen", "status", job)
    assert (status["priority"], status["gpus"], status["max_runtime"], status["slice_seconds"]) == (5, 2, 7200, 2700)
    assert "unchanged" in allot("chen", "update", job, "--gpus", "2").stdout

    refused = allot("chen", "update", job, "--slice", "10m", code=2)  # invalid: exit 2, nothing changed
    assert "slice" in refused.stderr and "a run slice lasts" in refused.stderr
    assert "unknown GPU type" in allot("chen", "update", job, "--gpu-types", "B200", code=2).stderr
    assert "give something to change" in allot("chen", "update", job, code=2).stderr
    assert allot.json("chen", "status", job)["slice_seconds"] == 2700
    assert "may not see" in allot("eli", "update", job, "--priority", "1", code=4).stderr  # permission: exit 4

    allot("chen", "release", job)
    wait_for(lambda: state(allot, job) == "running", "the updated job to start")
    [run] = allot.json("chen", "status", job)["runs"]
    assert sum(len(p["gpus"]) for p in run["placement"]) == 2
    assert "only a pending job can be updated" in allot("chen", "update", job, "--priority", "1", code=5).stderr
    assert "no job" in allot("chen", "update", "j-nosuchjob", "--priority", "1", code=3).stderr
    allot("chen", "cancel", job)
    wait_for(lambda: state(allot, job) == "cancelled", "the job to end")
