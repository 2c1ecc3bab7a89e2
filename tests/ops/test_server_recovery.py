"""The server's loop outlives what it depends on: an executor not answering (ExecutorUnavailable from the Executor
port, of which SlurmError while slurmctld restarts is one) and lost leadership stop cycling and are retried, never
end the process; the scheduler lock is released meanwhile. Runs the real Server on a real SQLite store with the
simulated executor (our test double of the Executor port) made to fail its first polls."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from allotment.core.jobstate import JobState
from allotment.engine.server import Server
from allotment.engine.setup import Built
from allotment.executors.slurm.cli import SlurmError
from allotment.ops.leader import FileLeadership
from allotment.ops.state import PROCESS, Role
from allotment.ports.executor import ExecutorUnavailable
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.engine.rig import FailingPolls, Rig
from tests.ops.servers import wait_for

SLURMCTLD_DOWN = "exit status 1: slurm_load_jobs error: Unable to contact slurm controller"


def nudge(server: Server) -> bool:
    """Wake the engine (the rig's clock stands still, so only a wake-up starts a cycle)."""
    server.wake.set()
    return True


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(lambda: SlurmError(["squeue"], SLURMCTLD_DOWN), id="slurmctld-away"),
        pytest.param(lambda: ExecutorUnavailable("the workload manager does not answer"), id="any-executor"),
    ],
)
def test_the_loop_retries_while_the_executor_is_unavailable_then_schedules(
    tmp_path: Path, error: Callable[[], Exception]
) -> None:
    """SlurmError is one ExecutorUnavailable; the server retries on the port's error, whatever the executor."""
    db = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(db)
    rig = Rig(db)
    flaky = FailingPolls(rig.executor, 3, error)
    rig.engine.executor = flaky
    lock = FileLeadership(tmp_path / "a.db.leader")
    server = Server(Built(rig.engine, rig.store, rig.sessions, rig.cfg), interval=1, leadership=lock, max_backoff=0.2)
    rig.submit("j1", "pretrain", "ben", gpus=8)
    PROCESS.reset()
    server.start()
    try:
        wait_for(lambda: rig.state("j1") == JobState.RUNNING, 20, "the job to start once the executor answers")
        assert flaky.failures == 0 and flaky.calls.count("poll") >= 4
        assert server._thread is not None and server._thread.is_alive()
        assert PROCESS.role is Role.LEADER and PROCESS.database_errors == 3
    finally:
        server.shutdown()
        PROCESS.reset()


def test_a_leader_that_loses_its_lock_stops_cycling_and_stands_by(tmp_path: Path) -> None:
    db = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(db)
    rig = Rig(db)
    lock = FileLeadership(tmp_path / "a.db.leader")
    server = Server(Built(rig.engine, rig.store, rig.sessions, rig.cfg), interval=0.2, leadership=lock)
    PROCESS.reset()
    server.start()
    try:
        wait_for(lambda: PROCESS.role is Role.LEADER and PROCESS.last_cycle_wall is not None, 20, "leadership")
        lock.release()  # as if the lock's connection died: holds() is now False
        rival = FileLeadership(tmp_path / "a.db.leader")
        assert rival.try_acquire()  # the lock is free for another instance
        wait_for(lambda: nudge(server) and PROCESS.role is Role.STANDBY, 20, "the server to stand by")
        last = PROCESS.last_cycle_wall
        time.sleep(0.5)
        assert PROCESS.last_cycle_wall == last  # no cycle while another instance holds the lock
        rival.release()
        wait_for(
            lambda: nudge(server) and PROCESS.role is Role.LEADER and PROCESS.last_cycle_wall != last,
            20,
            "taking the lock back",
        )
    finally:
        server.shutdown()
        PROCESS.reset()
