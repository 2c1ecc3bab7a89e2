"""`allot why` by job name and for a running job, with estimated starts never shown in the past, and `allot queue` in
scheduling order with blockers, against a running server (SQLite, local executor)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from allotment.cli import render
from allotment.cli.main import app
from tests.cli.conftest import Allot
from tests.sdk.live import wait_for


def refused(allot: Allot, user: str, *args: str) -> str:
    """`allot ARGS…` that must fail (any non-zero exit: the codes by cause are another test's concern); its stderr."""
    result = CliRunner().invoke(app, list(args), env=allot.env(user))
    assert result.exit_code != 0, result.output
    return result.stderr


@pytest.mark.parametrize(
    ("estimated", "shown"),
    [
        pytest.param(None, "—", id="unknown"),
        pytest.param(-188, "any moment (estimate overdue)", id="passed-3m08s-ago"),
        pytest.param(0, "any moment (estimate overdue)", id="due-now"),
        pytest.param(600, "(in 10m00s)", id="ahead"),
    ],
)
def test_an_estimated_start_is_never_shown_in_the_past(estimated: int | None, shown: str) -> None:
    now = 1_800_000_000
    text = render.estimate(None if estimated is None else now + estimated, now)
    assert shown in text and "ago" not in text


def test_why_by_name_for_a_running_job_and_an_ambiguous_name(allot: Allot) -> None:
    job = allot.json("chen", "run", "--budget", "finetune", "--name", "why-runner", "--", "sleep", "600")["job"]
    wait_for(lambda: allot.json("chen", "status", job["id"])["state"] == "running", "the job to start")
    why = allot.json("chen", "why", "why-runner")
    assert why["job_id"] == job["id"] and why["run"]["preemptible_now"] is False
    shown = allot("chen", "why", "why-runner").stdout
    assert "is running" in shown and "in its guaranteed slice until" in shown and "notice" in shown
    other = allot.json("eli", "run", "--budget", "finetune", "--name", "why-runner", "--", "sleep", "600")["job"]
    message = refused(allot, "chen", "why", "why-runner")
    assert "matches 2" in message and job["id"] in message and other["id"] in message
    allot("chen", "cancel", job["id"])
    allot("eli", "cancel", other["id"])


def test_queue_lists_running_jobs_then_pending_ones_with_their_blocker(allot: Allot) -> None:
    runner = allot.json("chen", "run", "--budget", "finetune", "--name", "q-runner", "--", "sleep", "600")["job"]["id"]
    args = ["--budget", "pretrain", "--gpus", "8", "--replicas", "4", "--name", "q-waiter", "--", "sleep", "600"]
    waiter = allot.json("ben", "run", *args)["job"]["id"]

    def items() -> dict[str, dict[str, object]]:
        return {j["id"]: j for j in allot.json("ada", "queue")["items"]}

    wait_for(lambda: items().get(runner, {}).get("state") == "running", "the runner to start")
    wait_for(lambda: items()[waiter]["blocker"] is not None, "the engine's reason")
    shown = items()
    order = list(shown)
    assert order.index(runner) < order.index(waiter) and shown[waiter]["blocker"] == "limit"
    only_pending = allot.json("ada", "queue", "--state", "pending")["items"]
    assert waiter in {j["id"] for j in only_pending} and {j["state"] for j in only_pending} == {"pending"}
    table = allot("ada", "queue").stdout
    for part in ("scheduling order", "blocker", "est. start", "limit: ", "q-runner", "q-waiter"):
        assert part in table
    allot("chen", "cancel", runner)
    allot("ben", "cancel", waiter)
