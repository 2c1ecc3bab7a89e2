"""Every conformance test runs on the in-memory store, SQLite (a temporary file) and PostgreSQL (a fresh schema in
the `test` database, dropped afterwards; skipped locally without a server, FAILED under CI=true)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store_conformance.backends import Backend, backend


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from backend(request.param, tmp_path)
