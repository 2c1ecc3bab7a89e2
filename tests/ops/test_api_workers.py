"""`allot server --api-workers N`: the API served by worker processes beside the engine's. A request through any
worker wakes the engine in its own process; /metrics from a worker counts the engine's cycles; a worker that dies
is replaced; a server killed with SIGKILL takes its workers with it; per-user limits are split between workers."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from allotment.api.workers import per_worker_limits
from allotment.cli.main import app
from allotment.engine.setup import Settings
from allotment.ops.wake import WakeListener, WakeSender, wake_path
from tests.databases import BACKENDS, postgres_engine
from tests.ops.servers import ServerProcess, start_server, wait_for

JOB = {"budget": "pretrain", "command": ["sleep", "30"]}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A data directory with a short path: the engine's wake socket path must fit a Unix socket address."""
    path = Path(tempfile.mkdtemp(prefix="allot-w-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, short_dir: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{short_dir / 'allotment.db'}"
    else:
        for engine in postgres_engine():
            yield engine.url.render_as_string(hide_password=False)


def workers_of(server: ServerProcess) -> set[int]:
    """The pids of the server's API worker processes (its multiprocessing spawn children)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == server.proc.pid and b"spawn_main" in cmdline:
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def served(database_url: str, short_dir: Path) -> Iterator[ServerProcess]:
    """A server with two API workers whose engine cycles every 60 s unless woken."""
    server = start_server(database_url, short_dir / "data", interval=60, args=("--api-workers", "2"))
    try:
        wait_for(lambda: len(workers_of(server)) == 2, 30, "two API workers")
        server.login("ben")
        yield server
    finally:
        server.kill(signal.SIGTERM)


def test_a_submission_through_a_worker_wakes_the_engine_in_its_process(served: ServerProcess) -> None:
    ready = served.get("/readyz")
    assert ready is not None and ready.json()["role"] == "api-worker"
    wait_for(lambda: served.metric("allotment_cycles_total") >= 1, 30, "the engine's first cycle")
    response = served.submit(JOB)
    assert response.status_code == 201, response.text
    job = response.json()["job"]["id"]
    # Only a wake starts a cycle before the 60-s interval: the job runs within seconds because the worker's wake
    # crossed into the engine's process.
    wait_for(lambda: served.job(job)["state"] == "running", 15, "the woken engine to start the job")


def test_metrics_from_any_worker_count_the_engines_cycles_and_leadership(served: ServerProcess) -> None:
    wait_for(lambda: served.metric("allotment_cycles_total") >= 1, 30, "a cycle counted in a worker's /metrics")
    for _ in range(6):  # a new connection each time: the kernel hands them to either worker
        body = httpx.get(f"{served.url}/metrics", headers={"Connection": "close"}, timeout=10).text
        values = dict(line.split(" ", 1) for line in body.splitlines() if line and not line.startswith("#"))
        assert float(values["allotment_leader"]) == 1.0
        assert float(values["allotment_cycles_total"]) >= 1


def test_a_worker_that_dies_is_replaced_and_the_api_keeps_answering(served: ServerProcess) -> None:
    first = workers_of(served)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: len(workers_of(served) - first) == 1 and len(workers_of(served)) == 2, 30, "a new worker")
    response = served.get("/healthz")
    assert response is not None and response.status_code == 200
    assert served.submit(JOB).status_code == 201


def test_a_server_killed_with_sigkill_takes_its_workers_with_it(served: ServerProcess) -> None:
    workers = workers_of(served)
    served.kill(signal.SIGKILL)
    wait_for(lambda: not any(alive(pid) for pid in workers), 15, "the workers to exit with their server")


LIMITS = [
    pytest.param(1, (20.0, 40, 0.5, 10), (20.0, 40, 0.5, 10), id="one worker: the deployment's limits"),
    pytest.param(2, (20.0, 40, 0.5, 10), (10.0, 20, 0.25, 5), id="two workers: half each"),
    pytest.param(4, (20.0, 3, 0.5, 1), (5.0, 1, 0.125, 1), id="a burst never below one"),
    pytest.param(8, (0.0, 0, 0.0, 0), (0.0, 1, 0.0, 1), id="no limit stays no limit"),
]


@pytest.mark.parametrize(("workers", "given", "each"), LIMITS)
def test_per_user_limits_are_split_between_workers(
    workers: int, given: tuple[float, int, float, int], each: tuple[float, int, float, int]
) -> None:
    rate, burst, token_rate, token_burst = given
    settings = Settings(
        config=Path("x"), data_dir=Path("d"), submit_rate=rate, submit_burst=burst, token_rate=token_rate,
        token_burst=token_burst,
    )  # fmt: skip
    split = per_worker_limits(settings, workers)
    assert (split.submit_rate, split.submit_burst, split.token_rate, split.token_burst) == each


def test_a_wake_datagram_sets_the_engines_event(short_dir: Path) -> None:
    event = threading.Event()
    listener = WakeListener(wake_path(short_dir), event)
    sender = WakeSender(wake_path(short_dir))
    try:
        sender.set()
        assert event.wait(5)
        assert (wake_path(short_dir).stat().st_mode & 0o777) == 0o600
    finally:
        sender.close()
        listener.close()
    assert not wake_path(short_dir).exists()


def test_a_wake_with_no_engine_listening_is_harmless(short_dir: Path) -> None:
    sender = WakeSender(wake_path(short_dir))
    try:
        for _ in range(3):
            sender.set()  # nothing listens: the request waits for the engine's next periodic cycle
    finally:
        sender.close()


def test_a_data_dir_too_deep_for_the_wake_socket_is_refused_before_anything_starts(short_dir: Path) -> None:
    deep = short_dir / ("d" * 120)
    result = CliRunner().invoke(app, ["server", "--data-dir", str(deep), "--api-workers", "2"])
    assert result.exit_code == 2
    assert "too deep for the engine's wake socket" in result.output and "--data-dir" in result.output
    assert not deep.exists()
