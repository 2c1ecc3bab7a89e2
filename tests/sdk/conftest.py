"""Fixtures for the SDK tests: one live server (SQLite, examples/small, local executor) per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.live import LiveServer, live_server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("sdk") / "data") as server:
        yield server
