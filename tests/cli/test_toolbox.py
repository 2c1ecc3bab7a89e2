"""Against a running server (SQLite, local executor): `allot why` by job name and for a running job, estimated
starts never shown in the past, `allot queue` in scheduling order with blockers, and `allot history` (sacct) as a
table, JSON and CSV."""

from __future__ import annotations

import csv
import io
import sys

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
    narrow = allot("ada", "queue", "--format", "id,state,start").stdout
    assert "est. start" in narrow and waiter in narrow and "blocker" not in narrow and "q-waiter" not in narrow
    assert "choose from" in allot("ada", "queue", "--format", "id,reason", code=2).stderr
    allot("chen", "cancel", runner)
    allot("ben", "cancel", waiter)


def test_history_of_finished_jobs_as_table_json_and_csv(allot: Allot) -> None:
    ok = allot.json("dana", "run", "--budget", "detection", "--name", "h-ok", "--gpus", "2", "--", "true")["job"]["id"]
    code = "import sys; sys.exit(3)"
    bad = allot.json("dana", "run", "--budget", "detection", "--name", "h-bad", "--", sys.executable, "-c", code)
    bad_id = bad["job"]["id"]

    def mine() -> dict[str, dict[str, object]]:
        return {h["id"]: h for h in allot.json("dana", "history")["items"]}

    wait_for(lambda: {ok, bad_id} <= set(mine()), "both jobs to finish")
    rows = mine()
    assert rows[ok]["state"] == "completed" and rows[ok]["exit_code"] == 0 and rows[ok]["attempts"] == 1
    assert rows[bad_id]["state"] == "failed" and rows[bad_id]["exit_code"] == 3
    assert {h["user"] for h in rows.values()} == {"dana"}  # sacct's habit: your own jobs by default
    failed = allot.json("dana", "history", "--state", "failed", "--since", "1h")["items"]
    assert [h["id"] for h in failed if h["id"] in (ok, bad_id)] == [bad_id]
    table = allot("dana", "history").stdout
    for part in ("History", "GPU-hours", "h-ok", "h-bad", "completed", "failed", "GPU-h", "exit"):
        assert part in table
    parsed = list(csv.DictReader(io.StringIO(allot("dana", "history", "--csv").stdout)))
    by_id = {r["id"]: r for r in parsed}
    assert by_id[bad_id]["exit_code"] == "3" and by_id[ok]["gpus"] == "2" and float(by_id[ok]["credits"]) >= 0
    assert ok in {h["id"] for h in allot.json("ada", "history", "--all-users")["items"]}
    assert ok not in {h["id"] for h in allot.json("ada", "history")["items"]}  # ada ran nothing herself
    assert ok not in {h["id"] for h in allot.json("dana", "history", "--until", "2020-01-01")["items"]}
    assert "--since" in allot("dana", "history", "--since", "yesterday", code=2).stderr
