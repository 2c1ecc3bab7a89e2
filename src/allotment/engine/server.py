"""Running Allotment as a long-lived process (`allot server`).

Owns: the process structure — the engine loop on its own thread, a wake-up event that submissions and admin
changes set, orderly shutdown on SIGTERM/SIGINT, and the hook where the HTTP API attaches (it shares the wake event
and the database) — and the server's operational duties around the loop:

- leader election: the engine cycles only while this instance holds the scheduler lock (a PostgreSQL advisory lock
  on a dedicated connection, or a file lock beside a SQLite database, ops/leader.py); otherwise it is a standby that
  serves the API and retries the lock every `standby_poll` seconds, and takes over (reconcile, then cycle) when the
  leader dies. The lock is checked before every cycle.
- reconnects: a database error (one of the store adapter's `Built.store_errors`) or an executor that cannot act
  (the Executor port's ExecutorUnavailable: slurmctld not answering) ends the engine loop, not the process: the
  lock is released, the loop waits with exponential backoff (up to `max_backoff` seconds) and starts again —
  reconcile, then cycle — on fresh connections.
- observation: the store is wrapped so every cycle feeds the Prometheus metrics and logs its starts and
  preemptions with job and budget ids (ops/metrics.py).

Must not: schedule (the engine does), serve HTTP itself, or name an adapter: it sees the executor and the store
through their ports and gets everything concrete from the composition root (setup.py).
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from allotment.engine.cycle import Engine
from allotment.engine.setup import Built, Settings, build, database_url
from allotment.ops.leader import Leadership, leadership_for
from allotment.ops.logs import configure_logging
from allotment.ops.metrics import CYCLE_FAILURES, LEADER, LostLeadership, ObservedStore
from allotment.ops.state import PROCESS, Role
from allotment.ports.executor import ExecutorUnavailable

log = logging.getLogger("allotment.server")


class _AlwaysLeader:
    """For a server built without a database URL to lock on (tests that hand in a Built): it always leads."""

    def try_acquire(self) -> bool:
        return True

    def holds(self) -> bool:
        return True

    def release(self) -> None:
        return None


@dataclass
class Server:
    built: Built
    interval: float = 5.0
    leadership: Leadership = field(default_factory=_AlwaysLeader)
    poll: float = 0.5
    """Wall seconds between asks to the executor for news while the engine waits."""
    min_gap: float = 0.05
    """Wall seconds from the end of one cycle to the start of the next, at least: a burst of submissions or executor
    events coalesces into one cycle, and API writes get the database between cycles (SQLite has one writer)."""
    standby_poll: float = 2.0
    """Seconds between a standby's attempts to take the scheduler lock."""
    max_backoff: float = 30.0
    stop: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    engine: Engine = field(init=False)
    _retryable: tuple[type[Exception], ...] = field(init=False)

    def __post_init__(self) -> None:
        self._retryable = (ExecutorUnavailable, *self.built.store_errors)
        observed = ObservedStore(self.built.engine.store, self.built.sessions, self.leadership.holds, self.min_gap)
        self.engine = dataclasses.replace(self.built.engine, store=observed)

    def start(self) -> None:
        """Start the engine loop on a background thread."""
        self._thread = threading.Thread(target=self._loop, name="allotment-engine", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        backoff = 0.5
        standby_logged = False
        while not self.stop.is_set():
            if not self.leadership.try_acquire():
                if not standby_logged:
                    log.info("standby: another instance holds the scheduler lock (or the database is away); waiting")
                    standby_logged = True
                self._set_role(Role.STANDBY)
                self.stop.wait(self.standby_poll)
                continue
            standby_logged = False
            self._set_role(Role.LEADER)
            log.info("leader: this instance schedules")
            try:
                self.engine.run(self.stop, self.wake, interval=self.interval, poll=self.poll)
                backoff = 0.5
            except LostLeadership:
                log.warning("leadership lost; standing by")
            except self._retryable as exc:  # the database or the workload manager is away: retry
                CYCLE_FAILURES.inc()
                PROCESS.database_errors += 1
                first = str(exc).splitlines()[0] if str(exc) else ""
                log.warning("error in the engine loop (%s: %s); retrying in %.1fs", type(exc).__name__, first, backoff)
                self.stop.wait(backoff)
                backoff = min(self.max_backoff, backoff * 2)
            except Exception:
                log.exception("the engine loop failed; stopping")
                self.stop.set()
                raise
            finally:
                self.leadership.release()
                self._set_role(Role.STANDBY)

    def _set_role(self, role: Role) -> None:
        PROCESS.set_role(role)
        LEADER.set(1 if role is Role.LEADER else 0)

    def shutdown_soon(self) -> None:
        """Ask the loop to stop (safe in a signal handler: sets events only)."""
        self.stop.set()
        self.wake.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def shutdown(self) -> None:
        self.stop.set()
        self.wake.set()
        self.join(30)


def serve(
    settings: Settings, interval: float = 5.0, attach: Callable[[Server], Callable[[], None] | None] | None = None
) -> None:
    """Build the engine, start its loop (as leader or standby), let `attach` add front ends (the HTTP API, or API
    worker processes), and run until a signal; what `attach` returns is called to stop the front ends before the
    engine stops. Logs go through the secret-redacting handler, as JSON lines when $ALLOT_LOG_FORMAT is json."""
    configure_logging()
    server = Server(build(settings), interval=interval, leadership=leadership_for(database_url(settings)))

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        server.shutdown_soon()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    log.info("engine running (database %s, executor %s)", database_url(settings), settings.executor)
    close = attach(server) if attach is not None else None
    try:
        while not server.stop.wait(0.5):
            pass
    finally:
        if close is not None:
            close()
        server.shutdown()
