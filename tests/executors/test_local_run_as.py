"""Jobs run as their owner (issue 22, owner mode of the local executor), shown with real accounts and processes.

A member's job used to run as the server's account: it could open the server's SQLite file and read other users'
env secrets from their spec.json. Here two throw-away accounts submit jobs through a LocalExecutor in owner mode,
and each job reports what it could do: `id -un`/`id -G` (its owner, groups included), and whether it could read or
write the database file, the data directory, another job's state directory (spec.json with env secrets) and another
job's working directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text

from allotment.core.model import Allocation
from allotment.engine.setup import Settings, secure_data_dir
from allotment.executors.accounts import Account, Mode, RunAs
from allotment.executors.local import LocalExecutor
from allotment.executors.local import supervisor as sv
from allotment.ports.executor import EventKind, LaunchSpec
from allotment.store.db import make_engine
from tests.accounts import open_root, unix_accounts
from tests.executors.harness import NODE, Harness, finals

SECRET = "hunter2-of-b"

PROBE = r"""
probe() { if "$@" >/dev/null 2>&1; then echo "$1:$2:allowed"; else echo "$1:$2:denied"; fi; }
echo "user:$(id -un)"
echo "groups:$(id -G)"
echo "home:$HOME:$USER:$LOGNAME"
probe cat "$DB"
probe sh -c "echo x >> \"\$1\"" "$DB"
probe ls "$DATA"
probe cat "$OTHER_SPEC"
probe ls "$OTHER_WORK"
probe touch "$OTHER_WORK/planted"
probe /usr/bin/python3 -c "import sqlite3; sqlite3.connect('$DB').execute('insert into api_tokens values (1)')"
pwd
"""


@dataclass
class World:
    root: Path
    data: Path
    db: Path
    harness: Harness
    executor: LocalExecutor
    a: Account
    b: Account


@pytest.fixture
def world() -> Iterator[World]:
    with unix_accounts(2, shared_group=True) as (a, b), open_root() as root:
        data = root / "data"
        mode = RunAs(Mode.OWNER, {"ada": a.name, "bob": b.name})
        secure_data_dir(Settings(config=root, data_dir=data), mode)
        db = data / "allotment.db"
        engine = make_engine(f"sqlite:///{db}")
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE api_tokens (id INTEGER)"))
        engine.dispose()
        harness = Harness(data)
        harness.state_dir = data / "executor"
        executor = LocalExecutor(data / "executor", [NODE], run_as=mode, jobs_dir=root / "data-jobs")
        try:
            yield World(root, data, db, harness, executor, a, b)
        finally:
            harness.cleanup()


def spec(job_id: str, user: str, argv: tuple[str, ...], env: dict[str, str] | None = None) -> LaunchSpec:
    return LaunchSpec(
        job_id=job_id,
        attempt=0,
        command=argv,
        placement=(Allocation(NODE, ()),),
        budget="physics",
        user=user,
        kind="batch",
        grace=5,
        slice_end=None,
        env=env or {},
    )


def output(w: World, job_id: str) -> list[str]:
    return w.executor.log_path(job_id, 0).read_text().splitlines()


def run_probe_against_bobs_running_job(w: World) -> list[str]:
    bob = spec("bob-job", "bob", ("sleep", "60"), env={"API_KEY": SECRET})
    w.executor.launch(bob)
    w.harness.events_until(w.executor, lambda evs: any(e.kind is EventKind.STARTED for e in evs), "bob's job to start")
    bob_state = w.executor.attempt_dir("bob-job", 0)
    env = {
        "DB": str(w.db),
        "DATA": str(w.data),
        "OTHER_SPEC": str(bob_state / sv.SPEC),
        "OTHER_WORK": str(w.root / "data-jobs" / w.b.name / "bob-job.0"),
    }
    w.executor.launch(spec("ada-job", "ada", ("/bin/sh", "-c", PROBE), env=env))
    events = w.harness.until_final(w.executor, "ada-job")
    [end] = [e for e in finals(events) if e.job_id == "ada-job"]
    assert end.exit_code == 0, end.detail
    w.executor.terminate("bob-job", 0, 0)
    w.harness.until_final(w.executor, "bob-job")
    return output(w, "ada-job")


def test_a_job_runs_as_its_owner_with_its_groups_and_home(world: World) -> None:
    lines = run_probe_against_bobs_running_job(world)
    a = world.a
    assert f"user:{a.name}" in lines
    [groups] = [line for line in lines if line.startswith("groups:")]
    assert {int(g) for g in groups.removeprefix("groups:").split()} == set(a.groups)
    assert len(a.groups) == 2  # its own group and the supplementary one: groups are included
    assert f"home:{a.home}:{a.name}:{a.name}" in lines
    assert lines[-1] == str(world.root / "data-jobs" / a.name / "ada-job.0")


def test_a_job_can_neither_read_nor_write_the_database_nor_list_the_data_directory(world: World) -> None:
    lines = run_probe_against_bobs_running_job(world)
    assert "cat:" + str(world.db) + ":denied" in lines
    assert "sh:-c:denied" in lines
    assert "ls:" + str(world.data) + ":denied" in lines
    assert "/usr/bin/python3:-c:denied" in lines  # the finding: inserting an api_tokens row
    engine = make_engine(f"sqlite:///{world.db}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM api_tokens")).scalar() == 0
    engine.dispose()


def test_a_job_cannot_read_another_jobs_secrets_or_touch_its_directory(world: World) -> None:
    lines = run_probe_against_bobs_running_job(world)
    assert any(line.startswith("cat:") and line.endswith("spec.json:denied") for line in lines)
    assert any(line.startswith("ls:") and line.endswith("bob-job.0:denied") for line in lines)
    assert any(line.startswith("touch:") and line.endswith("planted:denied") for line in lines)
    assert not (world.root / "data-jobs" / world.b.name / "bob-job.0" / "planted").exists()
    assert SECRET not in "\n".join(lines)


def test_the_files_holding_secrets_are_the_servers_and_each_job_directory_its_owners(world: World) -> None:
    run_probe_against_bobs_running_job(world)
    state = world.executor.attempt_dir("bob-job", 0)
    assert SECRET in (state / sv.SPEC).read_text()
    for path, mode in [
        (world.data, 0o700),
        (world.db, 0o600),
        (world.data / "executor", 0o700),
        (state, 0o700),
        (state / sv.SPEC, 0o600),
        (state / sv.OUTPUT, 0o600),
    ]:
        st = path.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (mode, os.geteuid()), path
    for account, job in [(world.a, "ada-job.0"), (world.b, "bob-job.0")]:
        for path in (world.root / "data-jobs" / account.name, world.root / "data-jobs" / account.name / job):
            st = path.stat()
            assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o700, account.uid, account.gid), path
    assert stat.S_IMODE((world.root / "data-jobs").stat().st_mode) == 0o711


def test_a_user_without_an_account_is_refused_with_the_reason(world: World) -> None:
    world.executor.launch(spec("ghost-job", "ghost", ("true",)))
    [end] = finals(world.harness.until_final(world.executor, "ghost-job"))
    assert (end.kind, end.exit_code) == (EventKind.EXITED, sv.EXIT_NOT_STARTED)
    assert "user 'ghost' has no Unix account 'ghost'" in end.detail and "useradd ghost" in end.detail


def test_a_user_mapped_to_root_is_refused(world: World) -> None:
    executor = LocalExecutor(
        world.data / "executor", [NODE], run_as=RunAs(Mode.OWNER, {"eve": "root"}), jobs_dir=world.root / "j"
    )
    executor.launch(spec("eve-job", "eve", ("true",)))
    [end] = finals(world.harness.until_final(executor, "eve-job"))
    assert end.exit_code == sv.EXIT_NOT_STARTED and "no Unix account 'root'" in end.detail
