"""Fixtures for the store tests: every test runs on SQLite (a temporary file) and on PostgreSQL (a fresh
schema per test module in the `test` database on 127.0.0.1:5432, dropped afterwards).

PostgreSQL is found at ALLOT_TEST_POSTGRES_URL (default: postgresql+psycopg://postgres@127.0.0.1:5432/test,
then the same as user root). When it is unreachable the PostgreSQL cases are skipped locally and FAIL under
CI=true.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.orm import Session, sessionmaker

from allotment.store.db import make_engine, session_factory
from allotment.store.migrate import upgrade
from allotment.store.tables import Base

POSTGRES_URLS = (
    [os.environ["ALLOT_TEST_POSTGRES_URL"]]
    if os.environ.get("ALLOT_TEST_POSTGRES_URL")
    else [f"postgresql+psycopg://{user}@127.0.0.1:5432/test" for user in ("postgres", "root")]
)
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


def _postgres_admin() -> tuple[Engine, str]:
    """An autocommit engine on the test database and its URL; skips (or fails under CI=true) without one."""
    failures: list[str] = []
    for url in POSTGRES_URLS:
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:
            admin.dispose()
            failures.append(f"{url}: {exc}")
            continue
        return admin, url
    message = "PostgreSQL is not reachable: " + "; ".join(failures)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def _postgres_engine() -> Iterator[Engine]:
    admin, url = _postgres_admin()
    schema = f"allot_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    in_schema = make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    engine = make_engine(in_schema.render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="module", params=BACKENDS)
def bare_engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """An empty database (no tables) of each backend."""
    if request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("store") / "data" / "allotment.db"
        engine = make_engine(f"sqlite:///{path}")
        try:
            yield engine
        finally:
            engine.dispose()
    else:
        yield from _postgres_engine()


@pytest.fixture(scope="module")
def engine(bare_engine: Engine) -> Engine:
    """A database migrated to the newest schema."""
    upgrade(bare_engine)
    return bare_engine


@pytest.fixture(scope="module")
def sessions(engine: Engine) -> sessionmaker[Session]:
    return session_factory(engine)


def wipe(engine: Engine) -> None:
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())


@pytest.fixture
def session(sessions: sessionmaker[Session], engine: Engine) -> Iterator[Session]:
    """A session on an empty, migrated database; the data is wiped after the test."""
    with sessions() as s:
        try:
            yield s
        finally:
            s.rollback()
    wipe(engine)
