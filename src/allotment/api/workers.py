"""Serving the API from worker processes beside the engine (`allot server --api-workers N`).

Owns: `start_workers`, which binds the API's listening socket once in the server process and spawns N worker
processes that accept on it (the kernel spreads connections between them), each with its own database sessions,
clock and FastAPI application, and a `WakeSender` in place of the engine's wake event; `ApiWorkers`, which replaces
a worker that dies and stops them all with the server; `per_worker_limits` (each worker holds 1/N of every
per-user rate and burst, so a user's limit stays what the deployment set); and the worker's own main.

Must not: write scheduling state (only the engine does: a worker writes requests — submissions, cancels, drains —
and wakes the engine, exactly as the in-process API does), run the engine, or outlive the server process (each
worker asks the kernel for SIGTERM when its parent dies, and watches its parent's pid besides).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from multiprocessing.process import BaseProcess
from pathlib import Path

import uvicorn

from allotment.api.app import create_app
from allotment.config import load_config
from allotment.engine.server import Server
from allotment.engine.setup import Settings, database_url, make_clock
from allotment.engine.setup import run_as as resolve_run_as
from allotment.ops.hardening import allowed_hosts
from allotment.ops.logs import configure_logging
from allotment.ops.state import PROCESS, Role
from allotment.ops.wake import WakeListener, WakeSender, wake_path
from allotment.store.db import make_engine, session_factory

log = logging.getLogger("allotment.api")

_PR_SET_PDEATHSIG = 1
RESTART_BACKOFF_MAX = 30.0
"""Seconds, at most, between restarts of a worker that keeps dying at once."""


def per_worker_limits(settings: Settings, workers: int) -> Settings:
    """The settings one of `workers` workers enforces: every per-user rate divided by `workers`, every burst too
    (at least 1), so the sum over workers is the deployment's limit. A rate of 0 (no limit) stays 0."""
    if workers <= 1:
        return settings
    return replace(
        settings,
        submit_rate=settings.submit_rate / workers,
        submit_burst=max(1, math.ceil(settings.submit_burst / workers)),
        token_rate=settings.token_rate / workers,
        token_burst=max(1, math.ceil(settings.token_burst / workers)),
    )


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs to build its application (pickled to it by multiprocessing's spawn)."""

    settings: Settings
    host: str
    open_login: bool
    workers: int
    wake: Path
    parent: int


def _die_with_parent(parent: int) -> None:
    """SIGTERM this process when the server process dies (Linux), and poll for it elsewhere or as a backstop."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="allotment-parent-watch", daemon=True).start()


def worker_main(spec: WorkerSpec, sock: socket.socket) -> None:
    """A worker process: build this process's sessions, clock and application, and serve on `sock` until SIGTERM."""
    _die_with_parent(spec.parent)
    configure_logging()
    PROCESS.set_role(Role.API_WORKER)
    settings = spec.settings
    config = load_config(settings.config)
    sessions = session_factory(make_engine(database_url(settings)))
    clock = make_clock(settings, sessions)
    app = create_app(
        sessions,
        per_worker_limits(settings, spec.workers),
        WakeSender(spec.wake),
        clock.now,
        config=config,
        open_login=spec.open_login,
        allowed_hosts=allowed_hosts(spec.host, settings.allowed_hosts),
        run_as=resolve_run_as(settings, config),
    )
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off")).run(sockets=[sock])


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The API's listening socket, bound once in the server process and shared by every worker."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


@dataclass
class ApiWorkers:
    """N worker processes serving one socket; a keeper thread replaces any that dies until `stop()`."""

    spec: WorkerSpec
    sock: socket.socket
    count: int
    check_every: float = 0.5
    listener: WakeListener | None = None
    """The engine's end of the workers' wakes, closed with them."""
    processes: list[BaseProcess] = field(default_factory=list)
    restarts: int = 0
    _stopping: threading.Event = field(default_factory=threading.Event)
    _keeper: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.spec.host}]" if ":" in self.spec.host else self.spec.host
        return f"http://{host}:{self.port}"

    def _spawn(self) -> BaseProcess:
        process = multiprocessing.get_context("spawn").Process(
            target=worker_main, args=(self.spec, self.sock), name="allotment-api-worker", daemon=True
        )
        process.start()
        return process

    def start(self) -> ApiWorkers:
        self.processes = [self._spawn() for _ in range(self.count)]
        self._keeper = threading.Thread(target=self._keep, name="allotment-api-keeper", daemon=True)
        self._keeper.start()
        log.info("API served by %d worker processes on %s", self.count, self.url)
        return self

    def _keep(self) -> None:
        backoff = 1.0
        while not self._stopping.wait(self.check_every):
            for index, process in enumerate(self.processes):
                if process.is_alive() or self._stopping.is_set():
                    continue
                log.warning("API worker %s exited (code %s); starting another", process.pid, process.exitcode)
                _forget(process)
                self.processes[index] = self._spawn()
                self.restarts += 1
                if self._stopping.wait(backoff):  # a worker that dies at once is not restarted in a hot loop
                    return
                backoff = min(RESTART_BACKOFF_MAX, backoff * 2)
                break
            else:
                backoff = 1.0

    def stop(self, timeout: float = 10.0) -> None:
        """Stop replacing workers, SIGTERM each (uvicorn finishes the requests in flight), SIGKILL what is left."""
        self._stopping.set()
        if self._keeper is not None:
            self._keeper.join(timeout)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(2)
            _forget(process)
        self.sock.close()
        if self.listener is not None:
            self.listener.close()


def _forget(process: BaseProcess) -> None:
    """Drop a dead worker's live-gauge files from the shared metrics folder (prometheus_client's multiprocess rule)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR") and process.pid is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(process.pid)  # type: ignore[no-untyped-call]


def start_workers(
    server: Server, settings: Settings, host: str, port: int, workers: int, *, open_login: bool = False
) -> ApiWorkers:
    """Bind `host:port` (0: any free port) and start `workers` API worker processes on it, which wake `server`'s
    engine through a datagram socket in the data directory; `stop()` them before the server stops."""
    if workers < 1:
        raise ValueError("start_workers needs at least one worker")
    wake = wake_path(settings.data_dir)
    listener = WakeListener(wake, server.wake)
    spec = WorkerSpec(settings, host, open_login, workers, wake, os.getpid())
    try:
        sock = bind(host, port)
    except OSError:
        listener.close()
        raise
    return ApiWorkers(spec, sock, workers, listener=listener).start()
