"""Serving the API next to a running engine (`allot server`).

Owns: `attach_api`, which runs uvicorn on a background thread with an application that shares the server's database
sessions, clock and wake event, waits until it listens, and stops it when the server stops.

Must not: run the engine (engine.server does) or handle signals (the main thread does).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from allotment.api.app import create_app
from allotment.engine.server import Server
from allotment.engine.setup import Settings
from allotment.ops.hardening import allowed_hosts

log = logging.getLogger("allotment.api")


@dataclass
class ApiServer:
    uvicorn: uvicorn.Server
    thread: threading.Thread
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        self.uvicorn.should_exit = True
        self.thread.join(timeout)


def _data_dir(server: Server) -> Path:
    state_dir = getattr(server.built.engine.executor, "state_dir", None)
    return Path(state_dir).parent if state_dir is not None else Path("data")


def attach_api(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 8642,
    *,
    settings: Settings | None = None,
    open_login: bool = False,
    startup_timeout: float = 30.0,
) -> ApiServer:
    """Serve the API on `host:port` (port 0: any free port) on a thread, sharing `server`'s sessions, clock and wake
    event; it stops when the server stops. `settings` gives the data directory, executor kind and the extra Host
    names to answer (default: the local executor's state directory's parent; the bound host and loopback names
    only). Returns once it listens."""
    if settings is None:
        settings = Settings(config=Path("."), data_dir=_data_dir(server))
    app = create_app(
        server.built.sessions,
        settings,
        server.wake,
        server.built.engine.clock.now,
        config=server.built.config,
        open_login=open_login,
        allowed_hosts=allowed_hosts(host, settings.allowed_hosts),
        run_as=server.built.run_as,
    )
    web = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=web.run, name="allotment-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not web.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the API did not start on {host}:{port}")
        time.sleep(0.02)
    bound = port
    for listener in web.servers:
        for sock in listener.sockets:
            bound = int(sock.getsockname()[1])
    api = ApiServer(web, thread, host, bound)

    def stop_with_server() -> None:
        server.stop.wait()
        api.stop()

    threading.Thread(target=stop_with_server, name="allotment-api-stop", daemon=True).start()
    log.info("API listening on %s", api.url)
    return api
