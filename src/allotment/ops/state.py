"""The process's operational state: is this instance the scheduling leader or a standby, and when did its engine
last finish a cycle (wall time).

Owns: one process-wide `ProcessState` that the server writes and the health probes and metrics read (the API is
served on a thread of the engine's process, or by API worker processes that say so).

Must not: decide leadership (ops.leader does) or read the database.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum


class Role(StrEnum):
    STARTING = "starting"
    """The engine is not running yet (or this process serves the API only)."""
    STANDBY = "standby"
    """Another instance holds the scheduler lock; this one serves the API and waits to take over."""
    LEADER = "leader"
    """This instance schedules."""
    API_WORKER = "api-worker"
    """A process of `allot server --api-workers N` that serves the API only; its server process runs the engine."""


@dataclass
class ProcessState:
    role: Role = Role.STARTING
    last_cycle_wall: float | None = None
    """time.time() at the end of this process's last successful cycle."""
    database_errors: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def set_role(self, role: Role) -> None:
        with self._lock:
            self.role = role

    def cycled(self) -> None:
        with self._lock:
            self.last_cycle_wall = time.time()

    def reset(self) -> None:
        with self._lock:
            self.role, self.last_cycle_wall, self.database_errors = Role.STARTING, None, 0


PROCESS = ProcessState()
