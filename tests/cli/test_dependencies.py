"""`allot run --dependency` / `-d` and `allot submit --dependency` against a running server (sbatch -d): a job
waits with its dependency as the reason in `allot why` and `allot queue`, `allot status` shows what it depends on,
it starts once the job it waits for completed, an afternotok job is cancelled with the reason when that job
succeeds, a singleton waits for the running job of its name, and what cannot be accepted exits 2."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Allot
from tests.sdk.live import wait_for


def state(allot: Allot, job_id: str) -> str:
    return str(allot.json("ada", "status", job_id)["state"])


def blocker(allot: Allot, job_id: str) -> str | None:
    found = allot.json("ada", "why", job_id)["blocker"]
    return None if found is None else str(found)


def run(allot: Allot, *args: str) -> str:
    return str(allot.json("chen", "run", "--budget", "pretrain", "--gpus", "8", *args)["job"]["id"])


def test_dependent_jobs_wait_start_or_are_cancelled_as_sbatch_would(allot: Allot, tmp_path: Path) -> None:
    first = run(allot, "--name", "dep-first", "--", "sleep", "3")
    second = run(allot, "--name", "dep-second", "--dependency", f"afterok:{first}", "--", "sleep", "600")
    on_failure = run(allot, "--name", "dep-on-failure", "-d", f"afternotok:{first}", "--", "sleep", "600")
    assert allot.json("chen", "status", second)["dependency"] == f"afterok:{first}"
    assert f"depends on afterok:{first}" in allot("chen", "status", second).stdout
    wait_for(lambda: blocker(allot, second) == "dependency", "the engine to explain the dependency")
    assert f"afterok:{first}" in allot("chen", "why", second).stdout
    assert "dependency" in allot("chen", "queue").stdout

    wait_for(lambda: state(allot, second) == "running", "the dependent job to start once the first completed")
    assert state(allot, first) == "completed"
    wait_for(lambda: state(allot, on_failure) == "cancelled", "the afternotok job to be cancelled")
    reason = allot.json("chen", "status", on_failure)["state_reason"]
    assert reason == f"cancelled: dependency never satisfied: afternotok:{first} ({first} completed)"

    spec = tmp_path / "single.yaml"
    spec.write_text(
        "name: dep-second\nbudget: pretrain\ncommand: sleep 600\nresources: {gpus: 8}\n"
        "dependency: afterok:j-000000000000\n"  # replaced by --dependency
    )
    single = str(allot.json("chen", "submit", str(spec), "--dependency", "singleton")["job"]["id"])
    assert allot.json("chen", "status", single)["dependency"] == "singleton"
    wait_for(lambda: blocker(allot, single) == "dependency", "the singleton to wait")
    assert f"{second} of the same name is running" in allot("chen", "why", single).stdout
    allot("chen", "cancel", second)
    wait_for(lambda: state(allot, single) == "running", "the singleton to start once its namesake ended")

    missing = allot("chen", "run", "--budget", "pretrain", "-d", "afterok:j-000000000000", "--", "true", code=2)
    assert "no job j-000000000000 that chen can see" in missing.output
    unsupported = allot("chen", "run", "--budget", "pretrain", "-d", "aftercorr:" + first, "--", "true", code=2)
    assert "unknown dependency type 'aftercorr'" in unsupported.output
    allot("chen", "cancel", single)
    wait_for(lambda: state(allot, single) == "cancelled", "the singleton to end")
