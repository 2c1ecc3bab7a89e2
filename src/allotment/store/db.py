"""Database connections: engines for SQLite and PostgreSQL, and sessions.

Owns: choosing the database URL (ALLOT_DATABASE_URL, or the SQLite file allotment.db in ALLOT_DATA_DIR,
default ./data), creating an engine with the connection settings Allotment relies on, the session factory, and
`unavailable(exc)`: whether an error means the database cannot be reached (retry later) rather than a bad request.

SQLite: the parent directory is created; every connection runs in WAL mode with foreign keys on, a busy
timeout and synchronous=NORMAL. Transactions begin IMMEDIATE (they take the write lock up front), so
read-then-write transactions from several threads or processes wait for each other instead of failing with
SQLITE_BUSY; a connection given the execution option sqlite_begin="DEFERRED" begins deferred (for
read-only work). PostgreSQL: `postgresql+psycopg://user@host:port/db` (add
`?options=-csearch_path%3Dschema` for a schema).

Must not: define tables or queries.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

IN_BATCH = 500
"""Values per `column IN (…)` list: well under SQLite's and PostgreSQL's parameter limits."""


_T = TypeVar("_T")


def unavailable(exc: BaseException) -> bool:
    """The database cannot be reached (a restart, a failover): the API answers 503, the intake fails a batch whole."""
    return isinstance(exc, OperationalError | InterfaceError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


def in_batches(values: Sequence[_T], size: int = IN_BATCH) -> Iterator[Sequence[_T]]:
    """`values` in slices of at most `size`, for queries that select by a long list of keys."""
    for i in range(0, len(values), size):
        yield values[i : i + size]


DATA_DIR_ENV = "ALLOT_DATA_DIR"
URL_ENV = "ALLOT_DATABASE_URL"
DB_FILE = "allotment.db"
BUSY_TIMEOUT_MS = 30_000


def default_url(environ: dict[str, str] | None = None) -> str:
    """ALLOT_DATABASE_URL if set, else sqlite:///<ALLOT_DATA_DIR or ./data>/allotment.db."""
    env = dict(os.environ) if environ is None else environ
    url = env.get(URL_ENV, "").strip()
    if url:
        return url
    data_dir = Path(env.get(DATA_DIR_ENV, "") or "data")
    return f"sqlite:///{data_dir / DB_FILE}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # the driver stops issuing BEGIN itself; see _sqlite_begin
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    mode = str(conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")).upper()
    if mode not in {"IMMEDIATE", "DEFERRED", "EXCLUSIVE"}:
        raise ValueError(f"sqlite_begin must be IMMEDIATE, DEFERRED or EXCLUSIVE, not {mode}")
    conn.exec_driver_sql(f"BEGIN {mode}")


def make_engine(url: str | None = None, **kwargs: Any) -> Engine:
    """An engine for `url` (default: default_url()). Extra keyword arguments go to create_engine."""
    parsed = make_url(url or default_url())
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            _create_private(Path(database).expanduser())
        engine = create_engine(parsed, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if parsed.get_backend_name() == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(parsed, **kwargs)
    raise ValueError(f"unsupported database {parsed.get_backend_name()!r}: use sqlite:/// or postgresql+psycopg://")


def _create_private(path: Path) -> None:
    """Create a SQLite database file that does not exist yet, readable by its owner only: its directory 0700 when
    this creates it, the file 0600 (empty: a valid empty database). SQLite gives the -wal and -shm files the
    database file's mode, so they are 0600 too. An existing file or directory keeps its mode."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects usable after commit (the engine reads, decides, then writes)."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def reading(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """A session for reads only: on SQLite its transaction starts DEFERRED, so it never waits for (or blocks) the
    engine's write lock; on PostgreSQL it is an ordinary session. Nothing is committed; loaded objects stay
    readable after it closes."""
    with sessions() as session:
        session.connection(execution_options={"sqlite_begin": "DEFERRED"})
        yield session


class NoDatabaseError(LookupError):
    """A read-only URL names a database that does not exist (nothing is created)."""


def _sqlite_read_only(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # BEGIN is ours: DEFERRED, so no write lock is ever taken
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA query_only=ON")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    finally:
        cursor.close()


def read_only_engine(url: str) -> Engine:
    """An engine that can only read `url`'s database and never changes it or its settings (a what-if over a live
    server's database). SQLite: the file must exist; it is opened read-only (mode=ro), its journal mode is left as it
    is and transactions begin DEFERRED. PostgreSQL: every transaction is read-only."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if not database or database == ":memory:" or not Path(database).expanduser().is_file():
            raise NoDatabaseError(f"{url}: no such database file")
        path = Path(database).expanduser().resolve()
        engine = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
        event.listen(engine, "connect", _sqlite_read_only)
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN DEFERRED"))
        return engine
    if parsed.get_backend_name() == "postgresql":
        existing = parsed.query.get("options", "")
        given = existing if isinstance(existing, str) else " ".join(existing)
        options = f"{given} -c default_transaction_read_only=on".strip()
        return create_engine(parsed.update_query_dict({"options": options}), pool_pre_ping=True)
    raise ValueError(f"unsupported database {parsed.get_backend_name()!r}: use sqlite:/// or postgresql+psycopg://")
