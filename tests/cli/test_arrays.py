"""`allot run --array` / `allot submit --array` (sbatch --array) against a running server: an array's tasks run as
jobs with `%N` at most at once, `allot status ARRAY` counts them per state, `allot queue` shows one array's pending
tasks on one line as squeue does, `allot hold`, `allot release` and `allot cancel` act on the whole array by its id
or on one task by the task's id, and a bad expression exits with the input code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.conftest import Allot
from tests.sdk.live import wait_for


def array(allot: Allot, array_id: str) -> dict[str, Any]:
    found: dict[str, Any] = allot.json("chen", "status", array_id)
    return found


def counts(allot: Allot, array_id: str) -> dict[str, int]:
    return dict(array(allot, array_id)["counts"])


def test_an_array_runs_n_at_once_and_is_held_released_and_cancelled_whole(allot: Allot) -> None:
    args = ("run", "--budget", "pretrain", "--gpus", "1", "--name", "sweep", "--array", "0-5%2")
    submitted = allot.json("chen", *args, "--", "sleep", "600")
    aid = submitted["array"]["id"]
    assert (submitted["array"]["tasks"], submitted["job"]["id"]) == (6, f"{aid}_0")
    wait_for(lambda: counts(allot, aid).get("running") == 2, "two tasks to run")
    wait_for(lambda: allot.json("chen", "why", f"{aid}_5")["blocker"] == "array-limit", "the limit's reason")
    assert "%2" in allot("chen", "why", f"{aid}_5").stdout
    shown = allot("chen", "status", aid).stdout
    assert "6 tasks [0-5%2]" in shown and "running" in shown and "0-1" in shown
    assert f"{aid}_[2-5]" in allot("chen", "queue").stdout  # the waiting tasks on one line
    assert f"task 3 of {aid}" in allot("chen", "status", f"{aid}_3").stdout  # a task names its array

    assert "held 4 tasks" in allot("chen", "hold", aid).stdout
    assert counts(allot, aid) == {"pending": 4, "running": 2, "held": 4}
    assert "released 4 tasks" in allot("chen", "release", aid).stdout
    assert f"cancel requested for {aid}_5" in allot("chen", "cancel", f"{aid}_5").stdout  # one task alone
    wait_for(lambda: counts(allot, aid).get("cancelled") == 1, "the one task to be cancelled")
    assert array(allot, aid)["indices"]["cancelled"] == "5"
    assert "cancel requested for 5 tasks" in allot("chen", "cancel", aid).stdout
    wait_for(lambda: counts(allot, aid) == {"cancelled": 6}, "every task to end")
    assert "may not" in allot("eli", "hold", aid, code=4).stderr


def test_submit_takes_the_array_on_the_command_line_and_refuses_a_bad_one(allot: Allot, tmp_path: Path) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text("budget: pretrain\ncommand: [sleep, '600']\nresources: {gpus: 1}\nhold: true\n")
    out = allot("chen", "submit", str(spec), "-a", "1,3,5-9:2%4").stdout
    assert "5 tasks" in out and "at most 4 at once" in out
    aid = out.split("array ")[1].split(":")[0].strip()
    assert counts(allot, aid) == {"pending": 5, "held": 5}  # submitted held, every task
    allot("chen", "cancel", aid)
    wait_for(lambda: counts(allot, aid) == {"cancelled": 5}, "the held array to be cancelled")
    refused = allot("chen", "submit", str(spec), "--array", "5-3", code=2)
    assert "array" in refused.stderr and "ends before it starts" in refused.stderr
    assert "no job array" in allot("chen", "status", "a-000000000000", code=3).stderr
