"""slurmctld restarted, then a Slurm node set DOWN, under a running `allot server` with the Slurm executor: the
server survives the controller's absence (its engine loop backs off and resumes), the jobs keep running in slurmd
with the same Slurm jobs and attempts, a job submitted while slurmctld was away starts once it is back; a node set
DOWN ends its runs as lost, their jobs are requeued and start again on the other node, and the owner gets a refund
that the infrastructure account pays. (The executor's own restart reconciliation and node-DOWN handling stepped by
hand are tests/executors/slurm/test_slurm_restart.py and tests/integration/test_slurm_engine.py.)

Runs a two-node Slurm cluster of its own (ALLOT_SLURM_DIR=/tmp/allot-slurm-ops, port 17400, nodes on 17401-17402):
restarting the controller of a cluster other tests use would break them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from allotment.executors.slurm.cli import SlurmCli, job_state
from tests.integration.support import SLURM_LOCAL
from tests.ops.servers import ServerProcess, start_server, wait_for
from tests.slurm_cluster import end_steps, leased_cluster, pid_alive

OPS_DIR = Path(os.environ.get("ALLOT_SLURM_OPS_DIR", "/tmp/allot-slurm-ops"))
OPS_PORT = os.environ.get("ALLOT_SLURM_OPS_PORT", "17400")
GPUS = 2
"""Per job: three such jobs fit on one 8-GPU node, so whatever the DOWN node ran fits on the other one."""


@pytest.fixture
def slurm_conf() -> Iterator[str]:
    env = {"ALLOT_SLURM_DIR": str(OPS_DIR), "ALLOT_SLURM_PORT": OPS_PORT}
    with leased_cluster(OPS_DIR, env, "--nodes", "2") as conf:
        yield conf


def restart_slurmctld(conf: str, while_away: Callable[[], None]) -> None:
    """Shut slurmctld down (slurmd and the jobs stay), call `while_away()`, and start it again as
    scripts/slurm-cluster does (state recovered from StateSaveLocation)."""
    pid = int((OPS_DIR / "run" / "slurmctld.pid").read_text().strip())
    SlurmCli(conf).scontrol("shutdown", "slurmctld")
    wait_for(lambda: not pid_alive(pid), 30, "slurmctld to exit")
    while_away()
    start_slurmctld(conf)
    wait_for(lambda: slurmctld_up(conf), 30, "slurmctld to answer again")


def start_slurmctld(conf: str) -> None:
    """The way scripts/slurm-cluster starts it (a daemon: the command returns once it has forked)."""
    subprocess.run(
        ["slurmctld", "-f", conf, "-i"],
        env={**os.environ, "SLURM_CONF": conf},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=30,
    )


def slurmctld_up(conf: str) -> bool:
    return "is UP" in SlurmCli(conf).scontrol("ping", check=False)


def slurm_running(cli: SlurmCli, job_ids: list[str]) -> dict[int, str]:
    """Slurm job id → node of every RUNNING Slurm job of these Allotment jobs (named allot.<job id>.…)."""
    return {
        i: str(j.get("nodes"))
        for i, j in cli.jobs().items()
        if job_state(j) == "RUNNING" and any(str(j.get("name")).startswith(f"allot.{k}.") for k in job_ids)
    }


def run_node(job: dict[str, Any]) -> str:
    [alloc] = job["runs"][-1]["placement"]
    return str(alloc["node"])


def submit(server: ServerProcess, name: str) -> str:
    spec = {"budget": "physics", "name": name, "command": ["sleep", "600"], "resources": {"gpus": GPUS}}
    response = server.submit(spec)
    assert response.status_code == 201, response.text
    return str(response.json()["job"]["id"])


@pytest.mark.slow
def test_server_rides_out_a_slurmctld_restart_and_refunds_work_lost_to_a_down_node(
    slurm_conf: str, tmp_path: Path
) -> None:
    cli = SlurmCli(slurm_conf)
    data = tmp_path / "data"
    server = start_server(
        f"sqlite:///{data / 'allotment.db'}",
        data,
        config=SLURM_LOCAL,
        executor="slurm",
        env={"SLURM_CONF": slurm_conf},
    )
    downed: str | None = None
    try:
        wait_for(lambda: server.role() == "leader", 30, "the server to lead")
        server.login("ben")
        first = [submit(server, "before-1"), submit(server, "before-2")]
        wait_for(lambda: len(slurm_running(cli, first)) == 2, 30, "two jobs to run in Slurm")
        wait_for(lambda: all(server.job(j)["state"] == "running" for j in first), 30, "Allotment to see them run")
        before = slurm_running(cli, first)

        # 1. slurmctld goes away and comes back; a job is submitted while it is away.
        late: list[str] = []

        def while_away() -> None:
            wait_for(
                lambda: "error in the engine loop (SlurmError" in server.log.read_text(errors="replace"),
                30,
                "the server to see slurmctld gone",
            )
            late.append(submit(server, "while-away"))  # the API does not need Slurm

        restart_slurmctld(slurm_conf, while_away)
        wait_for(lambda: server.job(late[0])["state"] == "running", 60, "the job submitted while away to start")
        # a restarted slurmctld starts work only once the slurmds have registered again: on a loaded 2-core machine
        # that took over 30 s once (CI, session 12), so the wait is as long as the one above
        wait_for(lambda: len(slurm_running(cli, [*first, *late])) == 3, 60, "it to run in Slurm")
        assert server.alive(), server.output()
        assert before.items() <= slurm_running(cli, first).items()  # the same Slurm jobs, on the same nodes
        for job_id in first:
            job = server.job(job_id)
            assert (job["state"], job["attempt"], len(job["runs"])) == ("running", 1, 1), job
            assert job["runs"][0]["ended_at"] is None

        # 2. A node goes DOWN in Slurm: its runs are lost, requeued onto the other node, and refunded.
        jobs = [*first, *late]
        started = max(server.job(j)["runs"][-1]["started_at"] for j in jobs)
        wait_for(lambda: time.time() >= started + 2, 5, "every run to have been charged something to refund")
        downed = run_node(server.job(first[0]))
        hit = [j for j in jobs if run_node(server.job(j)) == downed]
        cli.scontrol("update", f"NodeName={downed}", "State=DOWN", "Reason=test")
        wait_for(
            lambda: all(len(server.job(j)["runs"]) == 2 and server.job(j)["state"] == "running" for j in hit),
            60,
            "the lost runs to be requeued and start again",
        )
        wait_for(lambda: len(slurm_running(cli, jobs)) == 3, 30, "the requeued runs to run in Slurm")
        assert server.alive(), server.output()
        for job_id in jobs:
            job = server.job(job_id)
            if job_id not in hit:
                assert len(job["runs"]) == 1 and job["runs"][0]["ended_at"] is None  # untouched
                continue
            lost, again = job["runs"]
            assert (lost["end_reason"], lost["exit_code"]) == ("node lost", None)
            assert again["attempt"] == 1 and run_node(job) != downed
            entries = [(c["budget"], c["kind"], c["amount_micro"]) for c in job["charges"] if c["run_id"] == lost["id"]]
            charged = -sum(amount for budget, kind, amount in entries if (budget, kind) == ("physics", "charge"))
            assert charged > 0, entries
            assert ("physics", "refund", charged) in entries and ("infrastructure", "charge", -charged) in entries
            assert sum(amount for budget, _, amount in entries if budget == "physics") == 0  # the owner paid nothing
    finally:
        server.kill(signal.SIGTERM)
        if not slurmctld_up(slurm_conf):  # the test failed while it was away: leave a working cluster
            start_slurmctld(slurm_conf)
            wait_for(lambda: slurmctld_up(slurm_conf), 30, "slurmctld to answer again")
        if downed is not None:
            cli.scontrol("update", f"NodeName={downed}", "State=RESUME", check=False)
        cli.scancel("--user", "root")  # this cluster is the test's own: leave no job behind
        # nor a step: the steps of the runs on the DOWN node outlive their runs (Slurm requeued the jobs elsewhere
        # without reaching that node's slurmd), and slurmstepd ignores SIGTERM
        end_steps(slurm_conf)
