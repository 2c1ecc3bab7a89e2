"""Alembic environment for Allotment's schema.

Owns: wiring Alembic to the ORM metadata and to the connection allotment.store.migrate hands over (or,
when run from the alembic command line, to ALLOT_DATABASE_URL / the default data directory).

Must not: define schema; tables live in allotment.store.tables.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from allotment.store.db import make_engine
from allotment.store.tables import Base

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(context.config.get_main_option("sqlalchemy.url"))
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; run against a database")
run()
