"""Databases for tests: SQLite (a temporary file) and PostgreSQL (a fresh schema in the `test` database on
127.0.0.1:5432, dropped afterwards).

PostgreSQL is found at ALLOT_TEST_POSTGRES_URL (default: postgresql+psycopg://postgres@127.0.0.1:5432/test, then
the same as user root). When it is unreachable the PostgreSQL cases are skipped locally and FAIL under CI=true.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, make_url, text

from allotment.store.db import make_engine

POSTGRES_URLS = (
    [os.environ["ALLOT_TEST_POSTGRES_URL"]]
    if os.environ.get("ALLOT_TEST_POSTGRES_URL")
    else [f"postgresql+psycopg://{user}@127.0.0.1:5432/test" for user in ("postgres", "root")]
)
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


def postgres_admin() -> tuple[Engine, str]:
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


def postgres_engine() -> Iterator[Engine]:
    admin, url = postgres_admin()
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
