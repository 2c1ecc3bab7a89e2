"""Two server instances on one database: only one schedules (PostgreSQL advisory lock, SQLite file lock); the
standby serves the API and takes over when the leader is killed with SIGKILL."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from allotment.ops.leader import FileLeadership, PostgresLeadership
from tests.databases import BACKENDS, postgres_admin, postgres_engine
from tests.ops.servers import start_server, wait_for


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'allotment.db'}"
    else:
        for engine in postgres_engine():
            yield engine.url.render_as_string(hide_password=False)


def test_postgres_lock_is_one_per_schema_and_dies_with_its_connection() -> None:
    schemas = [postgres_engine(), postgres_engine()]
    one, other = (next(g).url.render_as_string(hide_password=False) for g in schemas)
    a, b, c = PostgresLeadership(one), PostgresLeadership(one), PostgresLeadership(other)
    try:
        assert a.try_acquire() and a.holds()
        assert not b.try_acquire()
        assert c.try_acquire()  # another schema: another deployment, not a rival
        assert a._conn is not None
        pid = a._conn.scalar(text("SELECT pg_backend_pid()"))
        admin, _ = postgres_admin()
        with admin.connect() as conn:  # the leader's connection dies (a crash, a network cut)
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        admin.dispose()
        assert not a.holds()
        assert b.try_acquire() and b.holds() and c.holds()
    finally:
        for lock in (a, b, c):
            lock.dispose()
        for g in schemas:
            next(g, None)


def test_file_lock_admits_one_holder(tmp_path: Path) -> None:
    first, second = FileLeadership(tmp_path / "db.leader"), FileLeadership(tmp_path / "db.leader")
    assert first.try_acquire() and not second.try_acquire()
    first.release()
    assert second.try_acquire() and second.holds()
    second.release()


@pytest.mark.slow
def test_only_the_leader_schedules_and_the_standby_takes_over(database_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"  # shared: the local executor's processes outlive a killed leader
    leader = start_server(database_url, data)
    standby = None
    try:
        wait_for(lambda: leader.role() == "leader", 30, "the first server to lead")
        standby = start_server(database_url, data)
        wait_for(lambda: standby is not None and standby.role() == "standby", 30, "the second to stand by")
        standby.login("ben")
        first = standby.submit({"budget": "pretrain", "command": ["sleep", "2"]}).json()["job"]["id"]
        wait_for(lambda: standby.job(first)["state"] == "completed", 30, "the leader to run a job sent to the standby")
        assert leader.metric("allotment_cycles_total") > 0
        assert standby.metric("allotment_cycles_total") == 0  # the standby never cycled
        assert standby.metric("allotment_leader") == 0 and leader.metric("allotment_leader") == 1

        leader.kill(signal.SIGKILL)
        wait_for(lambda: standby.role() == "leader", 30, "the standby to take over")
        second = standby.submit({"budget": "pretrain", "command": ["true"]}).json()["job"]["id"]
        wait_for(lambda: standby.job(second)["state"] == "completed", 30, "the new leader to run a job")
        ready = standby.get("/readyz")
        assert ready is not None and ready.status_code == 200
        assert standby.metric("allotment_cycles_total") > 0
    finally:
        leader.kill()
        if standby is not None:
            standby.kill(signal.SIGTERM)
