"""What `allot server` creates is private to the server's user: it runs with umask 077, so the SQLite database (token
hashes, jobs' environments), its WAL and the executor's state are not readable by other users of the host."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.ops.servers import start_server, wait_for


def test_the_servers_database_and_state_are_not_world_readable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(f"sqlite:///{data / 'allotment.db'}", data)
    try:
        server.login("ada")
        response = server.submit({"budget": "pretrain", "command": ["true"]})
        assert response.status_code == 201, response.text
        wait_for((data / "executor").exists, 30, "the executor's state directory")
    finally:
        server.kill()
    created = [p for p in data.rglob("*") if not p.name.startswith("server-")]  # the harness writes the log
    assert data / "allotment.db" in created
    exposed = {
        str(p.relative_to(data)): oct(stat.S_IMODE(p.stat().st_mode)) for p in created if p.stat().st_mode & 0o077
    }
    assert exposed == {}
