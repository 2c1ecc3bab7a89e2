"""Engine tests run on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.databases import BACKENDS, postgres_engine


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'allotment.db'}")
        upgrade(engine)
        try:
            yield engine
        finally:
            engine.dispose()
    else:
        for engine in postgres_engine():
            upgrade(engine)
            yield engine
