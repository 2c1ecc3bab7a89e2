"""`allot hold` / `allot release` and `allot run --hold` against a running server (scontrol hold/uhold/release,
sbatch -H): a job submitted held waits with its hold as the reason on an idle fleet, starts once released, a user
cannot release an administrator's hold, and refusals exit with the documented codes."""

from __future__ import annotations

from tests.cli.conftest import Allot
from tests.sdk.live import wait_for


def state(allot: Allot, job_id: str) -> str:
    return str(allot.json("ada", "status", job_id)["state"])


def blocker(allot: Allot, job_id: str) -> str | None:
    found = allot.json("ada", "why", job_id)["blocker"]
    return None if found is None else str(found)


def test_a_held_job_waits_for_its_release_and_a_user_cannot_release_an_admin_hold(allot: Allot) -> None:
    args = ("run", "--budget", "pretrain", "--gpus", "8", "--name", "held-one", "--hold")
    job = str(allot.json("chen", *args, "--", "sleep", "600")["job"]["id"])
    assert allot.json("chen", "status", job)["hold"] == "user"
    wait_for(lambda: blocker(allot, job) == "held", "the engine to explain the hold")
    assert state(allot, job) == "pending"
    why = allot("chen", "why", job).stdout
    assert "user hold" in why and f"allot release {job}" in why
    assert "held" in allot("chen", "queue").stdout

    assert "held (admin hold)" in allot("ada", "hold", job).stdout  # an administrator's hold is an admin hold
    assert "admin hold" in allot("chen", "release", job, code=4).stderr  # permission: exit 4
    assert "administrators only" in allot("chen", "hold", job, "--kind", "admin", code=4).stderr
    assert "--kind must be user or admin" in allot("chen", "hold", job, "--kind", "forever", code=2).stderr
    wait_for(lambda: "administrator" in allot.json("ada", "why", job)["message"], "the admin hold's reason")
    assert state(allot, job) == "pending"

    assert f"{job} released" in allot("ada", "release", job).stdout
    wait_for(lambda: state(allot, job) == "running", "the released job to start")
    assert "only a pending job can be held" in allot("chen", "hold", job, code=5).stderr  # conflict: exit 5
    assert "no job" in allot("chen", "hold", "j-nosuchjob", code=3).stderr  # not found: exit 3
    allot("chen", "cancel", job)
    wait_for(lambda: state(allot, job) == "cancelled", "the job to end")
