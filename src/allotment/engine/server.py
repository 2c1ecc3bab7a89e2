"""Running Allotment as a long-lived process (`allot server`).

Owns: the process structure — the engine loop on its own thread, a wake-up event that submissions and admin
changes set, orderly shutdown on SIGTERM/SIGINT, and the hook where the HTTP API attaches (it shares the wake event
and the database). Must not: schedule (the engine does) or serve HTTP itself.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from allotment.engine.setup import Built, Settings, build

log = logging.getLogger("allotment.server")


@dataclass
class Server:
    built: Built
    interval: float = 5.0
    stop: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the engine loop on a background thread."""
        self._thread = threading.Thread(target=self._loop, name="allotment-engine", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            self.built.engine.run(self.stop, self.wake, interval=self.interval)
        except Exception:
            log.exception("the engine loop failed; stopping")
            self.stop.set()
            raise

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def shutdown(self) -> None:
        self.stop.set()
        self.wake.set()
        self.join(30)


def serve(settings: Settings, interval: float = 5.0, attach: Callable[[Server], None] | None = None) -> None:
    """Build the engine, start its loop, let `attach` add front ends (the HTTP API), and run until a signal."""
    server = Server(build(settings), interval=interval)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        server.stop.set()
        server.wake.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    log.info("engine running (database %s, executor %s)", settings.database_url or "default", settings.executor)
    if attach is not None:
        attach(server)
    while not server.stop.wait(0.5):
        pass
    server.shutdown()
