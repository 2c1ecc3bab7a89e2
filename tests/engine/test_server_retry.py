"""The server retries on the Executor port's ExecutorUnavailable, whatever the executor: a plain simulated executor
(our test double of the port, not Slurm) that fails its first polls with it does not end the loop, and once it
answers the job starts. (Slurm's own error, a subclass, is tests/ops/test_server_recovery.py.)"""

from __future__ import annotations

from pathlib import Path

from allotment.core.jobstate import JobState
from allotment.engine.server import Server
from allotment.engine.setup import Built
from allotment.ops.leader import FileLeadership
from allotment.ops.state import PROCESS, Role
from allotment.ports.executor import ExecutorUnavailable
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.engine.rig import FailingPolls, Rig
from tests.ops.servers import wait_for


def test_the_loop_retries_on_the_ports_error_then_schedules(tmp_path: Path) -> None:
    db = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(db)
    rig = Rig(db)
    flaky = FailingPolls(rig.executor, 2, lambda: ExecutorUnavailable("the workload manager does not answer"))
    rig.engine.executor = flaky
    lock = FileLeadership(tmp_path / "a.db.leader")
    server = Server(Built(rig.engine, rig.store, rig.sessions, rig.cfg), interval=1, leadership=lock, max_backoff=0.2)
    rig.submit("j1", "pretrain", "ben", gpus=8)
    PROCESS.reset()
    server.start()
    try:
        wait_for(lambda: rig.state("j1") == JobState.RUNNING, 20, "the job to start once the executor answers")
        assert flaky.failures == 0
        assert server._thread is not None and server._thread.is_alive()
        assert PROCESS.role is Role.LEADER and PROCESS.database_errors == 2
    finally:
        server.shutdown()
        PROCESS.reset()
