"""Helpers for the integration tests: a real engine (allotment.engine.setup.build) on a data directory, submitting
jobs, stepping the engine on the real clock until something holds, and reading what the store recorded.

Owns: small conveniences shared by the integration test modules. Must not: mock anything or assert by itself
(it fails a test only when a wait gives up, which is a hang, not a speed check).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from allotment.core.model import ContractClass, JobKind
from allotment.engine.setup import Built, Settings
from allotment.store.db import reading
from allotment.store.jobs import Submission, request_cancel, submit
from allotment.store.tables import IntentRow, JobRow, RunRow

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
SLURM_LOCAL = ROOT / "examples" / "slurm-local" / "allotment.yaml"
PY = sys.executable

WEIRD_ARGS = ["it's", 'say "hi"; echo pwned', "$(touch /tmp/allot-pwned)", "`id`", "a\nb", "*", "", "-n", "${HOME}"]
"""Arguments that a shell would mangle: they must reach the job verbatim."""

REPORT = """\
import json, os, sys
out = sys.argv[1]
node = os.environ.get("ALLOT_NODE", "?")
with open(f"{out}/{node}.json", "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv[2:], "cwd": os.getcwd()}, f)
"""
"""A job that writes its environment, arguments and working directory to <dir>/<its node>.json."""

BEHAVE = """\
import os, signal, sys, time
out, mode = sys.argv[1], sys.argv[2]
attempt = int(os.environ["ALLOT_RESTART_COUNT"])
def log(word):
    with open(out, "a") as f:
        f.write(f"{attempt} {word} {os.environ.get('ALLOT_NODE', '?')}\\n")
def on_term(*_):
    log("term")
    if mode == "checkpoint":
        log("checkpoint")
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
if attempt > 0:
    log("resumed")
    sys.exit(0)
log("start")
while True:
    time.sleep(0.05)
"""
"""A preemptible job: logs `<attempt> start`; on SIGTERM logs `term`, then with mode `checkpoint` logs
`checkpoint` and exits 0, with mode `ignore` keeps running (until SIGKILL). A later attempt logs `resumed` and
exits 0."""

WAIT_THEN_EXIT = """\
import os, sys, time
go, code = sys.argv[1], int(sys.argv[2])
while not os.path.exists(go):
    time.sleep(0.05)
sys.exit(code)
"""
"""Runs until the file argv[1] exists, then exits with code argv[2]."""


def local_settings(data_dir: Path, config: Path = SMALL) -> Settings:
    return Settings(config=config, data_dir=data_dir, executor="local")


def small_config_with(tmp: Path, **policy: Any) -> Path:
    """A copy of examples/small with some policy settings changed."""
    data = yaml.safe_load(SMALL.read_text())
    data["policy"].update(policy)
    path = tmp / "allotment.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Job:
    id: str
    state: str
    attempt: int
    state_reason: str


@dataclass
class Run:
    attempt: int
    placement: list[dict[str, Any]]
    slice_end: int | None
    started_at: int
    confirmed_at: int | None
    ended_at: int | None
    exit_code: int | None
    preempt_reason: str | None
    idle_since: int | None
    end_reason: str | None


def add_job(
    built: Built,
    budget: str,
    user: str,
    command: Sequence[str],
    gpus: int,
    *,
    replicas: int = 1,
    kind: JobKind = JobKind.BATCH,
    contract: ContractClass = ContractClass.GUARANTEED,
    grace: int = 5,
    requeue: bool = True,
    env: Mapping[str, str] | None = None,
    slice_seconds: int = 1800,
    name: str = "",
) -> str:
    with built.sessions.begin() as s:
        job, _ = submit(
            s,
            Submission(
                budget=budget,
                user=user,
                command=list(command),
                gpus=gpus,
                replicas=replicas,
                kind=kind,
                contract=contract,
                grace=grace,
                requeue=requeue,
                env=dict(env or {}),
                slice_seconds=slice_seconds,
                name=name,
            ),
            built.engine.clock.now(),
        )
        return job.id


def cancel(built: Built, job_id: str) -> None:
    with built.sessions.begin() as s:
        request_cancel(s, job_id, built.engine.clock.now())


def job(built: Built, job_id: str) -> Job:
    with reading(built.sessions) as s:
        row = s.get(JobRow, job_id)
        assert row is not None, job_id
        return Job(row.id, row.state, row.attempt, row.state_reason)


def runs(built: Built, job_id: str) -> list[Run]:
    with reading(built.sessions) as s:
        rows = s.scalars(select(RunRow).where(RunRow.job_id == job_id).order_by(RunRow.attempt))
        return [
            Run(
                r.attempt,
                list(r.placement),
                r.slice_end,
                r.started_at,
                r.confirmed_at,
                r.ended_at,
                r.exit_code,
                r.preempt_reason,
                r.idle_since,
                r.end_reason,
            )
            for r in rows
        ]


def launches(built: Built, job_id: str) -> int:
    with reading(built.sessions) as s:
        return len(list(s.scalars(select(IntentRow).where(IntentRow.job_id == job_id, IntentRow.kind == "launch"))))


def step_until(built: Built, done: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    """Run engine cycles (every 0.2 s, real clock) until `done()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        built.engine.step()
        if done():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what or done}; jobs: {states(built)}")
        time.sleep(0.2)


def states(built: Built) -> dict[str, str]:
    """Every job's state and reason (for failure messages)."""
    with reading(built.sessions) as s:
        return {r.id: f"{r.state}: {r.state_reason}" for r in s.scalars(select(JobRow))}


def running(built: Built, *job_ids: str) -> Callable[[], bool]:
    """Every job runs and its current run has been confirmed started by the executor."""

    def check() -> bool:
        for job_id in job_ids:
            rs = runs(built, job_id)
            if job(built, job_id).state != "running" or not rs or rs[-1].confirmed_at is None:
                return False
        return True

    return check


def final(built: Built, *job_ids: str) -> Callable[[], bool]:
    return lambda: all(job(built, j).state in ("completed", "failed", "cancelled", "lost") for j in job_ids)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_until(done: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what or done}")
        time.sleep(0.1)
