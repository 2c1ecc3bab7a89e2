"""The client commands of `allot` against a running server (SQLite): submit, run, queue, status, why, logs, cancel,
session, budget, node, login and whoami, as tables and as --json, with their exit codes (0 fine, 1 the API refused
or is unreachable, 2 bad input)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import Allot
from tests.sdk.live import LiveServer, wait_for

PY = sys.executable
EVERY = ("--state", "pending", "--state", "running", "--state", "completed")
WEIRD = ["it's", 'say "hi"; echo pwned', "$(touch /tmp/allot-pwned)", "`id`", "*", "-n", "--lr", "${HOME}"]


def state(allot: Allot, user: str, job_id: str) -> str:
    return str(allot.json(user, "status", job_id)["state"])


def ended(allot: Allot, user: str, job_id: str) -> str:
    wait_for(lambda: state(allot, user, job_id) in ("completed", "failed", "cancelled"), f"{job_id} to end")
    return state(allot, user, job_id)


def test_submit_a_yaml_spec_then_status_and_logs(allot: Allot, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: hello\nbudget: pretrain\ncommand: [{PY}, -c, 'import time; time.sleep(1); print(\"hello from\", 7)']\n"
        "resources: {gpus: 2}\ncontract: {slice: 45m}\n",
        encoding="utf-8",
    )
    shown = allot("ben", "submit", str(spec))
    assert "submitted" in shown.stdout and "hello" in shown.stdout
    job = allot.json("ben", "submit", str(spec))["job"]
    assert job["name"] == "hello" and job["gpus"] == 2 and job["slice_seconds"] == 2700
    assert ended(allot, "ben", job["id"]) == "completed"
    status = allot("ben", "status", job["id"]).stdout
    for part in ("History", "Runs", "Charges", "pending → running", "completed", "exited 0"):
        assert part in status
    detail = allot.json("ben", "status", job["id"])
    assert [e["to_state"] for e in detail["history"]] == ["pending", "running", "completed"]
    assert detail["runs"][0]["exit_code"] == 0 and detail["charged_micro"] > 0
    assert allot("ben", "logs", job["id"]).stdout == "hello from 7\n"
    assert allot("ben", "logs", "-f", job["id"]).stdout == "hello from 7\n"
    [chunk] = [json.loads(line) for line in allot("ben", "logs", job["id"], "--json").stdout.splitlines()]
    assert chunk["complete"] and chunk["data"] == "hello from 7\n"
    assert allot("dana", "status", job["id"], code=4).stderr  # another budget's job: 403


def test_logs_of_a_gang_are_labelled_by_replica_and_one_replica_can_be_shown(allot: Allot, tmp_path: Path) -> None:
    code = "import os; r = os.environ['ALLOT_REPLICA']; [print(f'replica {r} step {i}', flush=True) for i in range(2)]"
    spec = tmp_path / "gang.yaml"
    spec.write_text(
        f"name: gang\nbudget: pretrain\ncommand: [{PY}, -c, {json.dumps(code)}]\nresources: {{gpus: 8, replicas: 2}}\n",
        encoding="utf-8",
    )
    job = allot.json("ben", "submit", str(spec))["job"]["id"]
    assert ended(allot, "ben", job) == "completed"
    lines = allot("ben", "logs", job).stdout.splitlines()
    assert sorted(lines) == [f"{r}: replica {r} step {i}" for r in (0, 1) for i in range(2)]
    assert allot("ben", "logs", "-f", job, "--replica", "1").stdout == "replica 1 step 0\nreplica 1 step 1\n"
    [chunk] = [json.loads(line) for line in allot("ben", "logs", job, "--replica", "0", "--json").stdout.splitlines()]
    assert chunk["replica"] == 0 and chunk["complete"] and chunk["data"] == "replica 0 step 0\nreplica 0 step 1\n"
    refused = allot("ben", "logs", job, "--replica", "2", code=2)
    assert "replica" in refused.stderr and "between 0 and 1" in refused.stderr


def test_a_bad_spec_is_rejected_with_field_and_line(allot: Allot, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\nbudget: pretrain\ncommand: [true]\nresources:\n  gpu: 2\n", encoding="utf-8")
    result = allot("ben", "submit", str(spec), code=2)
    assert "line 5" in result.stderr and "resources.gpu" in result.stderr and "gpus" in result.stderr
    assert "cannot read" in allot("ben", "submit", str(tmp_path / "missing.yaml"), code=2).stderr
    assert allot.json("ben", "queue", "--user", "ben", "--state", "pending")["items"] == []


def test_a_spec_over_a_limit_or_larger_than_the_fleet_is_reported_as_bad_input(allot: Allot, tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    huge.write_text("budget: pretrain\ncommand: [x]\n#" + "x" * (2 << 20) + "\n", encoding="utf-8")
    result = allot("ben", "submit", str(huge), code=2)
    assert "limit of 1048576 bytes" in result.stderr and "(413)" in result.stderr
    wide = tmp_path / "wide.yaml"
    wide.write_text("budget: pretrain\ncommand: [x]\nresources: {gpus: 9}\n", encoding="utf-8")
    result = allot("ben", "submit", str(wide), code=2)
    assert "line 3" in result.stderr and "resources.gpus" in result.stderr and "largest job" in result.stderr


def test_run_keeps_the_command_after_the_double_dash_verbatim(allot: Allot, tmp_path: Path) -> None:
    code = "import json, os, sys; print(json.dumps([sys.argv[1:], os.getcwd(), os.environ['STAGE']]))"
    args = ["run", "--gpus", "1", "--budget", "finetune", "--name", "argv", "--env", "STAGE=test",
            "--workdir", str(tmp_path), "--json", "--", PY, "-c", code, *WEIRD]  # fmt: skip
    job = json.loads(allot("eli", *args).stdout)["job"]
    assert job["command"] == [PY, "-c", code, *WEIRD] and job["workdir"] == str(tmp_path)
    assert ended(allot, "eli", job["id"]) == "completed"
    argv, cwd, stage = json.loads(allot("eli", "logs", job["id"]).stdout)
    assert argv == WEIRD and cwd == str(tmp_path) and stage == "test"
    assert not Path("/tmp/allot-pwned").exists()
    assert "give the command" in allot("eli", "run", "--budget", "finetune", code=2).stderr
    assert "KEY=VALUE" in allot("eli", "run", "--budget", "finetune", "--env", "X", "--", "true", code=2).stderr


def test_queue_tables_filters_and_pages(allot: Allot) -> None:
    # with a finished state, `allot queue` lists every matching job newest first (the active queue: test_toolbox)
    ids = [allot.json("chen", "run", "--budget", "finetune", "--name", f"q{i}", "--", "true")["job"]["id"]
           for i in range(3)]  # fmt: skip
    mine = allot.json("chen", "queue", "--mine", *EVERY)["items"]
    assert set(ids) <= {j["id"] for j in mine} and {j["user"] for j in mine} == {"chen"}
    assert all(j["budget"] == "finetune" for j in allot.json("ada", "queue", "--budget", "finetune")["items"])
    page = allot.json("ada", "queue", "--user", "chen", "--limit", "2", *EVERY)
    assert len(page["items"]) == 2 and page["next_cursor"]
    rest = allot.json("ada", "queue", "--user", "chen", "--limit", "2", "--cursor", page["next_cursor"], *EVERY)
    assert set(ids) <= {j["id"] for j in page["items"] + rest["items"]}
    assert set(ids) <= {
        j["id"] for j in allot.json("ada", "queue", "--user", "chen", "--all", "--limit", "1", *EVERY)["items"]
    }
    for job_id in ids:
        ended(allot, "chen", job_id)
    done = allot.json("ada", "queue", "--user", "chen", "--state", "completed", "--state", "failed")["items"]
    assert set(ids) <= {j["id"] for j in done}
    table = allot("chen", "queue", "--user", "chen", "--limit", "2", *EVERY).stdout
    # jobs submitted within one second are ordered by id, so ask the API which two make up the first page
    first = [j["name"] for j in allot.json("chen", "queue", "--user", "chen", "--limit", "2", *EVERY)["items"]]
    assert "Jobs (" in table and "completed" in table and "more: allot queue --cursor" in table
    assert all(name in table for name in first)
    assert "no jobs match" in allot("chen", "queue", "--budget", "segmentation", "--user", "nobody").stdout


def test_why_then_cancel(allot: Allot) -> None:
    # 32 GPUs: more than pretrain's limit of 24, so it waits whatever else runs
    job = allot.json("ben", "run", "--budget", "pretrain", "--gpus", "8", "--replicas", "4", "--", "sleep", "600")
    job_id = job["job"]["id"]
    wait_for(lambda: allot.json("ben", "why", job_id)["blocker"] is not None, "the engine's reason")
    why = allot.json("ben", "why", job_id)
    assert why["needed_gpus"] == 32 and why["standing"]["budget"] == "pretrain" and "limit of 24" in why["message"]
    shown = allot("ben", "why", job_id).stdout
    assert "waits" in shown and "needs 32" in shown and "limit of 24" in shown
    assert "cancel requested" in allot("ben", "cancel", job_id).stdout
    assert ended(allot, "ben", job_id) == "cancelled"
    assert allot("ben", "why", job_id, code=3).stderr  # no longer pending: 404
    assert allot("ben", "cancel", job_id, code=5).stderr  # already finished: 409


def test_session_waits_until_started_and_says_how_to_attach(allot: Allot) -> None:
    result = allot("eli", "session", "--gpus", "2", "--budget", "segmentation", "--length", "15m", "--timeout", "90")
    assert "started after" in result.stdout and "allot attach j-" in result.stdout
    job_id = result.stdout.split("session ", 1)[1].split()[0]
    assert state(allot, "eli", job_id) == "running"
    second = allot.json("eli", "session", "--budget", "segmentation", "--length", "10m", "--timeout", "90")
    assert second["ready"] and second["attach"][0]["env"]["ALLOT_JOB_ID"] == second["job"]["id"]
    allot("eli", "cancel", job_id, second["job"]["id"])
    assert ended(allot, "eli", job_id) == "cancelled"
    assert allot("eli", "session", "--gpus", "9", "--budget", "segmentation", code=2).stderr  # over the session limit


def test_budget_tree_show_and_plans(allot: Allot, tmp_path: Path) -> None:
    tree = allot.json("ben", "budget", "tree")
    assert tree["budgets"][0]["name"] == "lab" and tree["budgets"][0]["depth"] == 0
    assert {b["name"] for b in allot.json("ben", "budget", "tree", "--root", "vision")["budgets"]} == {
        "vision", "detection", "segmentation"}  # fmt: skip
    table = allot("ben", "budget", "tree").stdout
    assert f"Budgets, period {tree['period']}" in table and "pretrain" in table
    detail = allot.json("ben", "budget", "show", "pretrain")
    assert detail["budget"]["name"] == "pretrain" and detail["forecast"]["window"] == 86_400
    shown = allot("ben", "budget", "show", "detection").stdout
    assert "Members" in shown and "dana" in shown and "detection" in shown
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"period: {tree['period']}\nbudgets:\n  - name: finetune\n    allocation: 4800\n", "utf-8")
    diff = allot.json("ada", "budget", "plan", "diff", str(plan))
    assert [(c["target"], c["field"]) for c in diff["changes"]] == [("finetune", "allocation")]
    assert "1 changes" in allot("ben", "budget", "plan", "diff", str(plan)).stdout  # the lead of language
    applied = allot("ada", "budget", "plan", "apply", str(plan), "--why", "cli test")
    assert "audit record" in applied.stdout
    assert "no changes" in allot("ada", "budget", "plan", "diff", str(plan)).stdout
    other = tmp_path / "vision.yaml"
    other.write_text(f"period: {tree['period']}\nbudgets:\n  - name: detection\n    allocation: 1\n", "utf-8")
    # ben leads language, not vision
    assert allot("ben", "budget", "plan", "apply", str(other), "--why", "x", code=4).stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(f"period: {tree['period']}\nbudgets:\n  - name: finetune\n    alocation: 1\n", "utf-8")
    assert "line 4" in allot("ada", "budget", "plan", "diff", str(broken), code=2).stderr


def test_nodes_cordon_drain_resume(allot: Allot) -> None:
    nodes = allot.json("fay", "node", "list")
    assert len(nodes) == 4 and {n["state"] for n in nodes} <= {"ready"}
    assert "lab-h100-0003" in allot("ben", "node", "list").stdout
    assert "cordoned" in allot("fay", "node", "cordon", "lab-h100-0003", "--why", "test").stdout
    drained = allot.json("fay", "node", "drain", "lab-h100-0003", "--why", "ECC errors")
    assert drained["node"]["state"] == "draining" and drained["empty_by"] > 0
    assert [n["name"] for n in allot.json("fay", "node", "list", "--state", "draining")] == ["lab-h100-0003"]
    assert "empty by" in allot("fay", "node", "drain", "lab-h100-0003").stdout
    assert "ready" in allot("fay", "node", "resume", "lab-h100-0003").stdout
    assert allot("ben", "node", "drain", "lab-h100-0003", code=4).stderr  # not an operator: 403
    assert allot("fay", "node", "drain", "lab-h100-0003", "--force", code=4).stderr  # forced: administrators only
    assert allot("fay", "node", "cordon", "no-such-node", code=3).stderr


def test_login_saves_a_token_that_later_commands_use(allot: Allot, live: LiveServer) -> None:
    anonymous = {"ALLOT_TOKEN": None}
    logged = allot(None, "login", "--user", "ben", env=anonymous)
    assert "logged in" in logged.stdout and "ben" in logged.stdout
    config = allot.config_home / "allot" / "config.toml"
    assert config.stat().st_mode & 0o777 == 0o600 and live.url in config.read_text()
    without_env = {"ALLOT_TOKEN": None, "ALLOT_URL": None}
    assert allot.json(None, "whoami", env=without_env)["user"] == "ben"
    assert "member" in allot(None, "whoami", env=without_env).stdout
    assert allot(None, "login", "--user", "dana", env=without_env, code=4)  # ben cannot log in as dana
    saved = allot.json(None, "login", "--token", live.tokens["dana"], env=without_env)
    assert saved["user"] == "dana"
    assert allot.json(None, "whoami", env=without_env)["user"] == "dana"
    assert allot(None, "login", "--user", "nobody", env=anonymous, code=4).stderr  # as dana (saved): 403


def test_exit_codes_without_a_server_or_a_valid_token(allot: Allot) -> None:
    unreachable = allot("ben", "queue", env={"ALLOT_URL": "http://127.0.0.1:9"}, code=6)
    assert "cannot reach" in unreachable.stderr
    bad = allot(None, "queue", env={"ALLOT_TOKEN": "allot_not-a-token"}, code=4)
    assert "allot login" in bad.stderr
    assert allot("ben", "status", "j-000000000000", code=3).stderr
    usage = allot.json("ada", "usage")
    assert usage["periods"] and all(r["net_micro"] >= 0 for r in usage["rows"])
    assert "Usage, periods" in allot("ada", "usage", "--budget", "language").stdout


def test_the_installed_console_script(live: LiveServer) -> None:
    allot = Path(sys.executable).parent / "allot"
    env = {**os.environ, "ALLOT_URL": live.url, "ALLOT_TOKEN": live.tokens["ada"], "COLUMNS": "200"}
    done = subprocess.run(
        [str(allot), "node", "list", "--json"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == 4
    module = subprocess.run([sys.executable, "-m", "allotment.cli", "whoami"], env=env, capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert module.returncode == 0 and "ada" in module.stdout


def test_node_list_shows_each_clusters_session_room(allot: Allot) -> None:
    """`allot node list` ends with the session room the engine's last cycle sized for each cluster (decision 54)."""
    wait_for(lambda: "session room" in allot("ben", "node", "list").stdout, "the engine's first cycle")
    out = allot("ben", "node", "list").stdout
    assert "session room  lab:" in out and "GPUs kept for sessions" in out and "floor 8" in out
