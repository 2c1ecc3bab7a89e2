"""The engine tests of the baselines run on SQLite and on PostgreSQL, with the engine tests' database fixture."""

from tests.engine.conftest import db

__all__ = ["db"]
