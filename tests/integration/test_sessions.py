"""Sessions with the local executor (issue 4): a session holds its GPUs running `sleep infinity` when given no
command; `allot attach JOB -- CMD` runs in the session's environment (same GPUs, ALLOT_* variables, working
directory) and registers the client, so an attended session is not reclaimed as idle; once nobody is attached
for `session_idle_timeout` the core reclaims it; a client still attached when its session is ended goes with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from allotment.core.model import JobKind
from allotment.engine.setup import Built, build
from allotment.executors.local import LocalExecutor
from allotment.executors.local import supervisor as sv
from tests.integration.conftest import stop_everything
from tests.integration.support import (
    PY,
    ROOT,
    add_job,
    cancel,
    final,
    job,
    local_settings,
    running,
    runs,
    small_config_with,
    step_until,
    wait_until,
)

IDLE_TIMEOUT = 6
ALLOT = [sys.executable, "-c", "from allotment.cli.main import app; app()"]
"""The `allot` command line (main.py's own `__main__` guard runs before its later commands are registered)."""


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Built]:
    config = small_config_with(tmp_path, session_idle_timeout=IDLE_TIMEOUT)
    built = build(local_settings(tmp_path / "data", config))
    try:
        yield built
    finally:
        stop_everything(built)


def _attach(data: Path, job_id: str, *command: str) -> subprocess.Popen[bytes]:
    argv = [*ALLOT, "attach", job_id, "--data-dir", str(data), "--", *command]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_attach_runs_in_the_session_environment_and_idle_sessions_are_reclaimed(engine: Built, tmp_path: Path) -> None:
    data = tmp_path / "data"
    executor = engine.engine.executor
    assert isinstance(executor, LocalExecutor)
    session = add_job(engine, "detection", "dana", [], 2, kind=JobKind.SESSION, slice_seconds=3600)
    step_until(engine, running(engine, session), what="the session to start")
    spec = sv.read_json(executor.attempt_dir(session, 0) / sv.SPEC)
    assert spec is not None and spec["argv"] == ["sleep", "infinity"]

    # Attached for longer than the idle timeout: the session is not reclaimed meanwhile.
    report = tmp_path / "client.json"
    held = IDLE_TIMEOUT + 3
    code = "import json, os, sys, time\njson.dump([dict(os.environ), os.getcwd()], open(sys.argv[1], 'w'))\n"
    code += f"time.sleep({held})"
    client = _attach(data, session, PY, "-c", code, str(report))
    wait_until(report.exists, what="the attached command to run")
    step_until(engine, lambda: runs(engine, session)[0].idle_since is None, what="the ATTACHED event")
    until = time.monotonic() + held - 1
    attached_at = time.time()  # a moment the client was still attached: it detaches later than this
    while client.poll() is None and time.monotonic() < until:
        attached_at = time.time()
        engine.engine.step()
        assert job(engine, session).state == "running"
        time.sleep(0.3)
    assert client.wait(timeout=30) == 0, client.stderr.read() if client.stderr else ""

    env, cwd = json.loads(report.read_text())
    [alloc] = runs(engine, session)[0].placement
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(str(g) for g in alloc["gpus"])
    assert (env["ALLOT_JOB_ID"], env["ALLOT_KIND"], env["ALLOT_NODE"]) == (session, "session", alloc["node"])
    assert env["ALLOT_ATTACHED"] == "1"
    assert cwd == str(executor.attempt_dir(session, 0))

    # Nobody attached: reclaimed once idle for the timeout (counted from the detach), and not requeued.
    step_until(engine, final(engine, session), timeout=IDLE_TIMEOUT + 30, what="the idle session to be reclaimed")
    [run] = runs(engine, session)
    assert run.preempt_reason == "idle-session"
    assert run.idle_since is not None and run.idle_since >= int(attached_at)
    assert job(engine, session).state == "completed"


def test_a_client_leaves_with_its_session_and_batch_jobs_cannot_be_attached(engine: Built, tmp_path: Path) -> None:
    data = tmp_path / "data"
    batch = add_job(engine, "pretrain", "ben", ["sleep", "300"], 1)
    session = add_job(engine, "detection", "dana", ["sleep", "300"], 1, kind=JobKind.SESSION, grace=3)
    step_until(engine, running(engine, session, batch), what="the jobs to start")

    refused = _attach(data, batch, "true")
    assert refused.wait(timeout=60) == 2 and refused.stderr is not None and b"not a session" in refused.stderr.read()
    unknown = _attach(data, "j-nope", "true")
    assert unknown.wait(timeout=60) == 2

    marker = tmp_path / "attached"
    client = _attach(data, session, "sh", "-c", 'touch "$1"; exec sleep 300', "sh", str(marker))
    wait_until(marker.exists, what="the client to run")
    cancel(engine, session)
    step_until(engine, final(engine, session), what="the session to end")
    assert client.wait(timeout=30) == 128 + 15  # SIGTERM when the session was told to leave
    assert os.path.exists(marker)
    cancel(engine, batch)
    step_until(engine, final(engine, batch), what="the batch job to end")
