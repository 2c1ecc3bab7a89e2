"""The shipped migrations build exactly the ORM's schema, on both databases; engines get their settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, insert, inspect, text
from sqlalchemy.exc import IntegrityError

from allotment.store.db import default_url, make_engine
from allotment.store.migrate import MIGRATIONS, alembic_config, current, downgrade, upgrade
from allotment.store.tables import Base, NodeRow


def test_migrations_yield_exactly_the_orm_metadata(bare_engine: Engine) -> None:
    assert current(bare_engine) is None
    upgrade(bare_engine)
    upgrade(bare_engine)  # a second upgrade is a no-op
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert current(bare_engine) == head
    with bare_engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == []
    tables = set(inspect(bare_engine).get_table_names())
    assert tables == set(Base.metadata.tables) | {"alembic_version"}
    downgrade(bare_engine)
    assert set(inspect(bare_engine).get_table_names()) <= {"alembic_version"}
    assert current(bare_engine) is None
    upgrade(bare_engine)
    assert current(bare_engine) == head


def test_migrations_are_shipped_inside_the_package() -> None:
    assert (MIGRATIONS / "env.py").is_file()
    assert any(p.suffix == ".py" for p in (MIGRATIONS / "versions").iterdir())


def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "allotment.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30_000
            assert conn.execute(text("PRAGMA synchronous")).scalar() == 1  # NORMAL
        assert path.parent.is_dir()
    finally:
        engine.dispose()


def test_foreign_keys_are_enforced(engine: Engine) -> None:
    row = {"name": "x", "cluster": "no-such-cluster", "gpu_type": "h100", "gpus": 8, "labels": {}}
    row |= {"state": "ready", "forced": False, "reason": None, "updated_at": 0}
    with engine.connect() as conn, pytest.raises(IntegrityError):
        conn.execute(insert(NodeRow).values(**row))


def test_default_url_from_environment() -> None:
    assert default_url({}) == "sqlite:///data/allotment.db"
    assert default_url({"ALLOT_DATA_DIR": "/srv/allot"}) == "sqlite:////srv/allot/allotment.db"
    pg = "postgresql+psycopg://allot@db:5432/allot"
    assert default_url({"ALLOT_DATA_DIR": "/srv/allot", "ALLOT_DATABASE_URL": pg}) == pg
