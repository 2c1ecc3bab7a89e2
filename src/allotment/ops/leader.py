"""Leader election: of several server instances on one database, exactly one schedules.

Owns: `Leadership` (try_acquire / holds / release) and its two kinds. PostgreSQL: a session-level advisory lock
(`pg_try_advisory_lock`, keyed by the schema so deployments in different schemas of one database do not contend),
held on a DEDICATED connection outside the pool — the lock lives exactly as long as that connection, so a leader
that dies (SIGKILL, lost network, a database restart) loses it and a standby's next try wins. SQLite: an exclusive
`flock` on `<database file>.leader` (one host; the kernel drops it when the process dies). `leadership_for(url)`
picks the kind.

Must not: schedule or touch scheduling rows; the server asks `holds()` before every cycle and stops cycling when
it is false.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Protocol

from sqlalchemy import Connection, create_engine, make_url, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

log = logging.getLogger("allotment.leader")
LOCK_NAME = "allotment-scheduler"


class Leadership(Protocol):
    def try_acquire(self) -> bool:
        """Take the scheduler lock if it is free (True also when already held); never blocks."""
        ...

    def holds(self) -> bool:
        """Whether this instance still holds the lock (PostgreSQL: its connection is alive)."""
        ...

    def release(self) -> None: ...


class PostgresLeadership:
    """A session-level advisory lock on a dedicated connection (autocommit, no pool)."""

    def __init__(self, url: str, connect_timeout: int = 5) -> None:
        self._engine = create_engine(
            make_url(url),
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",
            connect_args={"connect_timeout": connect_timeout, "keepalives": 1, "keepalives_idle": 10},
        )
        self._conn: Connection | None = None

    def try_acquire(self) -> bool:
        if self.holds():
            return True
        try:
            conn = self._engine.connect()
        except SQLAlchemyError as exc:
            log.warning("leader election: cannot reach PostgreSQL (%s)", type(exc).__name__)
            return False
        try:
            query = "SELECT pg_try_advisory_lock(hashtext(:name || ':' || coalesce(current_schema(), '')))"
            got = conn.scalar(text(query), {"name": LOCK_NAME})
        except SQLAlchemyError:
            conn.close()
            return False
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def holds(self) -> bool:
        if self._conn is None:
            return False
        try:
            self._conn.execute(text("SELECT 1"))
        except SQLAlchemyError:
            log.warning("leader election: the lock's connection is gone; leadership lost")
            self._drop()
            return False
        return True

    def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(SQLAlchemyError):
                self._conn.execute(text("SELECT pg_advisory_unlock_all()"))
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except SQLAlchemyError:
                conn.invalidate()

    def dispose(self) -> None:
        self.release()
        self._engine.dispose()


class FileLeadership:
    """An exclusive, non-blocking flock on a file next to the SQLite database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def holds(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def leadership_for(url: str) -> PostgresLeadership | FileLeadership:
    """The lock that fits the database: an advisory lock on PostgreSQL, a file lock beside a SQLite file."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return PostgresLeadership(url)
    if backend == "sqlite":
        database = parsed.database
        if not database or database == ":memory:" or database.startswith("file:"):
            raise ValueError("leader election on SQLite needs a database file")
        return FileLeadership(Path(database).expanduser().with_name(Path(database).name + ".leader"))
    raise ValueError(f"no leader election for {backend!r}")
