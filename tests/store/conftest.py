"""Fixtures for the store tests: every test runs on SQLite (a temporary file) and on PostgreSQL (a fresh
schema per test module in the `test` database on 127.0.0.1:5432, dropped afterwards).

PostgreSQL is found at ALLOT_TEST_POSTGRES_URL (default: postgresql+psycopg://postgres@127.0.0.1:5432/test,
then the same as user root). When it is unreachable the PostgreSQL cases are skipped locally and FAIL under
CI=true.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from allotment.store.db import make_engine, session_factory
from allotment.store.migrate import upgrade
from allotment.store.tables import Base
from tests.databases import BACKENDS, postgres_engine


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
        yield from postgres_engine()


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
