"""Running the Alembic migrations shipped inside this package.

Owns: an Alembic configuration that points at allotment/store/migrations (no alembic.ini needed) and
upgrade(engine), which brings a database to the newest schema.

Must not: hold migration steps (they live in migrations/versions).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for this package's migrations, using `connection` when given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database behind `engine` to `revision` (default: the newest), in one transaction."""
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), revision)


def current(engine: Engine) -> str | None:
    """The revision the database is at, or None before the first migration."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database behind `engine` back to `revision` (default: before the first migration)."""
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)
