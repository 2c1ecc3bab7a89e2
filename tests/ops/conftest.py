"""Operations tests reuse the API tests' real application and database fixture (SQLite and PostgreSQL)."""

from tests.api.conftest import db

__all__ = ["db"]
