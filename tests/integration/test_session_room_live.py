"""Issue 21's live acceptance test of the session room (decisions 49 and 54): a real server (the engine cycling
every second, the API on a free localhost port, SQLite, the local executor running every job as a process on this
host over the demo's virtual fleet of 4 × 8 GPUs), driven only through the SDK as users would.

First, the demo's cluster after its script (`allot demo`'s scripted workload, run as the demo runs it): a session
asked for then is ready within 5 s.

Then a full cluster — three 8-GPU guaranteed training jobs, the fourth node kept as the session room — with a guaranteed
8-GPU job of another budget waiting for a planned start. Five 8-GPU sessions are asked for one after another, each
released before the next: each is ready within 5 s, and the waiting job still starts by its planned start.

The 5 s bound is the promise itself (promise 9), measured from the request to the session being reported ready by
the API; the engine needs well under a second for it (one cycle after the submission wakes it, then the executor's
start report). It is kept at the issue's 5 s rather than tightened, so that a loaded 2-core machine running other
tests does not make it flake; a session that needed a slice to end or a victim's grace would take 30–60 s here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from allotment.api import attach_api
from allotment.cli.demowatch import Watcher
from allotment.cli.livedemo import demo_config, script
from allotment.core.jobstate import JobState
from allotment.engine.server import Server
from allotment.engine.setup import Settings, build
from allotment.sdk import Client
from tests.integration.conftest import stop_everything

READY_WITHIN = 5.0
"""Seconds from asking to a ready session (issue 21's acceptance bound)."""
CYCLE = 1.0
"""The engine's cycle interval here: a planned start is acted on by the first cycle at or after it."""
USERS = ("ada", "ben", "chen", "dana", "eli")


def _batch(name: str, budget: str) -> dict[str, Any]:
    return {
        "name": name,
        "budget": budget,
        "command": ["sleep", "600"],
        "resources": {"gpus": 8},
        "contract": {"slice": "60s"},
        "grace": "5s",
    }


def _ready_within(user: Client, budget: str, gpus: int, name: str) -> tuple[str, float]:
    """Ask for a session; return its id and the seconds until the API reported it ready."""
    asked = time.monotonic()
    session = user.request_session(budget, gpus=gpus, length="10m", name=name).job.id
    _until(lambda: user.session(session).ready, 60, f"{name} to be ready")
    return session, time.monotonic() - asked


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def users(tmp_path: Path) -> Iterator[dict[str, Client]]:
    config = demo_config()
    assert config is not None, "examples/demo/allotment.yaml is missing"
    settings = Settings(config=config, data_dir=tmp_path / "data", executor="local", charge_every=5)
    server = Server(build(settings), interval=CYCLE)
    server.start()
    clients: dict[str, Client] = {}
    try:
        api = attach_api(server, "127.0.0.1", 0, settings=settings, open_login=True)
        with Client(api.url) as anonymous:
            tokens = {u: anonymous.login(u, name="room test").secret for u in USERS}
        clients = {u: Client(api.url, t) for u, t in tokens.items()}
        yield clients
    finally:
        for client in clients.values():
            client.close()
        server.shutdown()
        stop_everything(server.built)


@pytest.mark.slow
def test_five_sessions_in_a_row_are_each_ready_within_5_s_and_the_waiting_job_keeps_its_plan(
    users: dict[str, Client],
) -> None:
    ben, dana, eli = users["ben"], users["dana"], users["eli"]
    state: Callable[[Client, str], str] = lambda c, j: c.job(j).state  # noqa: E731
    training = [ben.submit(_batch(f"train-{n}", "pretrain")).job.id for n in range(3)]
    _until(lambda: all(state(ben, j) == JobState.RUNNING for j in training), 30, "the cluster to fill")

    waiting = dana.submit(_batch("detect", "detection")).job.id
    _until(lambda: dana.why(waiting).estimated_start is not None, 20, "the waiting job's planned start")
    planned = dana.why(waiting).estimated_start
    assert planned is not None

    waits: list[float] = []
    for n in range(5):
        session, waited = _ready_within(eli, "segmentation", 8, f"notebook-{n}")
        waits.append(waited)
        eli.release_session(session)
        _until(lambda s=session: state(eli, s) in (JobState.CANCELLED, JobState.COMPLETED), 30, f"session {n} to end")  # type: ignore[misc]
    assert all(w <= READY_WITHIN for w in waits), f"sessions were ready after {[round(w, 1) for w in waits]} s"

    _until(lambda: state(dana, waiting) == JobState.RUNNING, max(0, planned - time.time()) + 90, "the waiting job")
    started = dana.job(waiting).runs[-1].started_at
    assert started <= planned + CYCLE, f"the waiting job started at {started}, its plan said {planned}"


@pytest.mark.slow
def test_after_the_demos_script_a_session_is_ready_within_5_s(users: dict[str, Client], tmp_path: Path) -> None:
    gpus = sum(n.gpus for n in users["ada"].nodes())
    quiet = Console(file=open(tmp_path / "demo.txt", "w"), width=200)  # noqa: SIM115 (closed below)
    try:
        with Watcher(users["ada"], quiet, cluster_gpus=gpus) as watcher:
            outcome = script(watcher, users, tmp_path / "data")
    finally:
        quiet.file.close()
    assert outcome.ok, (tmp_path / "demo.txt").read_text()
    _, waited = _ready_within(users["dana"], "detection", 2, "after-the-demo")
    assert waited <= READY_WITHIN, f"the session was ready after {waited:.1f} s"
