"""`allot update` (scontrol update job) and `allot requeue` (scontrol requeue, requeuehold) against a running server:
a held job's priority, GPUs, time limit, slice and GPU types are changed with each field's before → after shown and
the engine starts it as updated; a running job is requeued with the same id, starts again, or waits held until
released; refusals change nothing and exit with the documented codes."""

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


def test_a_running_job_is_requeued_and_requeued_held(allot: Allot) -> None:
    args = ("run", "--budget", "pretrain", "--gpus", "8", "--name", "to-requeue", "--grace", "5s")
    job = str(allot.json("chen", *args, "--", "sleep", "600")["job"]["id"])
    wait_for(lambda: state(allot, job) == "running", "the job to start")
    assert f"requeue requested for {job}" in allot("chen", "requeue", job).stdout
    wait_for(lambda: allot.json("ada", "status", job)["attempt"] == 2, "the requeued job to start again")
    again = allot.json("ada", "status", job)
    assert again["id"] == job and again["requeues"] == 1 and again["runs"][0]["preempt_reason"] == "requeue-requested"
    wait_for(lambda: state(allot, job) == "running", "its second run")

    assert "waits held (user hold)" in allot("chen", "requeue", "--hold", job).stdout
    wait_for(lambda: state(allot, job) == "pending", "the job to be back in the queue")
    wait_for(lambda: allot.json("ada", "why", job)["blocker"] == "held", "the hold's reason")
    assert "a pending one is in the queue already" in allot("chen", "requeue", job, code=5).stderr  # conflict
    assert "no job" in allot("chen", "requeue", "j-nosuchjob", code=3).stderr  # not found
    assert "may not see" in allot("eli", "requeue", job, code=4).stderr  # not allowed
    allot("chen", "release", job)
    wait_for(lambda: allot.json("ada", "status", job)["attempt"] == 3, "the released job to start")
    allot("chen", "cancel", job)
    wait_for(lambda: state(allot, job) == "cancelled", "the job to end")
    ended = allot.json("ada", "status", job)
    assert len(ended["runs"]) == 3 and all(r["ended_at"] is not None for r in ended["runs"])
