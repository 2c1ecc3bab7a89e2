"""The server's data directory is its own (issue 22): created 0700 with the SQLite database and its -wal/-shm files
0600, and in owner mode an existing directory that others could reach is tightened, so no job can open them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from allotment.engine.setup import Settings, build, database_url, secure_data_dir
from allotment.executors.accounts import Mode, RunAs
from allotment.store.db import make_engine
from tests.engine.rig import SMALL


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_directory_and_database_are_private(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    built = build(Settings(config=SMALL, data_dir=data))
    try:
        with built.sessions() as s:  # a reader keeps the WAL and the shared-memory file in place
            s.execute(text("SELECT count(*) FROM jobs"))
            files = {p.name: mode_of(p) for p in data.iterdir() if p.name.startswith("allotment.db")}
    finally:
        built.close()
    assert mode_of(data) == 0o700
    assert files == {"allotment.db": 0o600, "allotment.db-wal": 0o600, "allotment.db-shm": 0o600}
    assert mode_of(data / "executor") == 0o700


def test_a_sqlite_database_is_created_private_wherever_it_lives(tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "x.db"
    engine = make_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    engine.dispose()
    assert (mode_of(db.parent), mode_of(db)) == (0o700, 0o600)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param(Mode.OWNER, (0o700, 0o600), id="owner-mode-tightens"),
        pytest.param(Mode.SINGLE_USER, (0o755, 0o644), id="single-user-leaves-the-operators-modes"),
    ],
)
def test_an_existing_loose_data_directory(tmp_path: Path, mode: Mode, expected: tuple[int, int]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    settings = Settings(config=SMALL, data_dir=data)
    db = Path(database_url(settings).removeprefix("sqlite:///"))
    db.touch()
    db.chmod(0o644)
    secure_data_dir(settings, RunAs(mode))
    assert (mode_of(data), mode_of(db)) == expected
