"""`allot run` asks for what sbatch asks for: `--cpus` (sbatch --cpus-per-task) and `--mem` per replica, `--time`
(a time limit: the job's max_runtime, in sbatch's own forms or as 90m, 8h) and `--image`; the reply and `allot
status` show them, a request no node could hold is refused naming the field, and `allot why` says when a job
waits for CPUs beside free GPUs. Against a live server on
examples/small (4 nodes × 8 H100 with 224 CPUs and 2T each)."""

from __future__ import annotations

import pytest

from allotment.cli.jobs import slurm_time
from tests.cli.conftest import Allot
from tests.sdk.live import wait_for


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        pytest.param("90", 90 * 60, id="minutes"),
        pytest.param("5:30", 5 * 60 + 30, id="minutes-and-seconds"),
        pytest.param("1:30:00", 5400, id="hours-minutes-seconds"),
        pytest.param("2-0", 2 * 86400, id="days-and-hours"),
        pytest.param("1-12:30", 86400 + 12 * 3600 + 30 * 60, id="days-hours-minutes"),
        pytest.param("1-00:00:10", 86410, id="days-hours-minutes-seconds"),
        pytest.param("8h", "8h", id="a-duration-is-left-to-the-server"),
        pytest.param("later", "later", id="anything-else-is-left-to-the-server"),
    ],
)
def test_time_reads_sbatch_forms(given: str, seconds: int | str) -> None:
    assert slurm_time(given) == seconds


def test_run_passes_cpus_memory_time_and_image(allot: Allot) -> None:
    # Held: the local executor fails a job with an image when it starts, which would race the cancel below.
    job = allot.json(
        "ben", "run", "--budget", "pretrain", "--gpus", "2", "--replicas", "2", "--cpus", "16", "--mem", "64G",
        "--time", "1:30:00", "--image", "registry.example/train:1", "--no-requeue", "--hold", "--", "sleep", "600",
    )["job"]  # fmt: skip
    assert (job["cpus"], job["memory_mib"], job["max_runtime"], job["image"]) == (
        16, 65536, 5400, "registry.example/train:1"
    )  # fmt: skip
    shown = allot("ben", "status", job["id"]).stdout
    assert "16 CPUs and 64G per replica" in shown and "max runtime 1h30m" in shown
    allot("ben", "cancel", job["id"])


def test_run_with_a_duration_for_time_and_no_cpus_asks_for_none(allot: Allot) -> None:
    job = allot.json("ben", "run", "--budget", "pretrain", "--time", "45m", "--", "true")["job"]
    assert (job["cpus"], job["memory_mib"], job["max_runtime"], job["image"]) == (0, 0, 2700, None)


def test_run_refuses_what_no_node_could_hold(allot: Allot) -> None:
    result = allot("ben", "run", "--budget", "pretrain", "--cpus", "300", "--", "true", code=2)
    assert "resources.cpus" in result.stderr and "224" in result.stderr
    result = allot("ben", "run", "--budget", "pretrain", "--mem", "lots", "--", "true", code=2)
    assert "resources.memory" in result.stderr and "not a memory size" in result.stderr
    result = allot("ben", "run", "--budget", "pretrain", "--time", "soon", "--", "true", code=2)
    assert "max_runtime" in result.stderr


def _state(allot: Allot, job_id: str) -> str:
    return str(allot.json("ben", "status", job_id)["state"])


def test_why_explains_a_job_waiting_for_cpus(allot: Allot) -> None:
    hogs = [
        allot.json("ben", "run", "--budget", "pretrain", "--cpus", "200", "--", "sleep", "600")["job"]["id"]
        for _ in range(4)
    ]
    wait_for(lambda: all(_state(allot, h) == "running" for h in hogs), "the four CPU-heavy jobs to run")
    waiting = allot.json("ben", "run", "--budget", "pretrain", "--cpus", "32", "--", "true")["job"]["id"]
    wait_for(lambda: "CPUs" in allot("ben", "why", waiting).stdout, "the engine to explain the waiting job")
    shown = allot("ben", "why", waiting).stdout
    assert _state(allot, waiting) == "pending"
    assert "32 CPUs per replica" in shown and "GPUs free but not the CPUs or memory beside them" in shown
    allot("ben", "cancel", *hogs, waiting)
