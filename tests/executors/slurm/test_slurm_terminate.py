"""Termination with notice on the real local cluster: SIGTERM now, SIGKILL once the grace has passed.

Covers: a job that traps SIGTERM gets it (writes a marker, exits with its own code); a job that ignores it is
killed after the grace (exit code 128 + 9); terminating a job that never started withdraws it; repeating
terminate does not restart the grace.
"""

from __future__ import annotations

from pathlib import Path

from allotment.executors.slurm import SlurmExecutor
from allotment.ports.executor import EventKind

from .helpers import ended, final, kinds, spec, started, wait_file, wait_for

TRAPS_TERM = 'trap \'echo "got TERM" > "$1"; exit 7\' TERM; echo ready > "$2"; while :; do sleep 0.1; done'
IGNORES_TERM = 'trap \'echo "ignored TERM" > "$1"\' TERM; echo ready > "$2"; while :; do sleep 0.1; done'


def test_terminate_delivers_sigterm(executor: SlurmExecutor, tmp_path: Path) -> None:
    marker, ready = tmp_path / "marker", tmp_path / "ready"
    executor.launch(spec("term-1", ["bash", "-c", TRAPS_TERM, "x", str(marker), str(ready)], ["gpu05"]))
    wait_file(ready)
    executor.terminate("term-1", 0, grace=60)
    executor.terminate("term-1", 0, grace=1)  # repeating does not shorten (or restart) the grace
    events = wait_for(executor, ended("term-1"))

    assert marker.read_text() == "got TERM\n"
    assert kinds(events, "term-1") == [EventKind.STARTED, EventKind.EXITED]
    assert final(events, "term-1").exit_code == 7
    rec = executor.store.get("term-1", 0)
    assert rec is not None
    assert rec.kill_sent_at is None  # it left by itself within its grace


def test_job_ignoring_sigterm_is_killed_after_grace(executor: SlurmExecutor, tmp_path: Path) -> None:
    marker, ready = tmp_path / "marker", tmp_path / "ready"
    executor.launch(spec("kill-1", ["bash", "-c", IGNORES_TERM, "x", str(marker), str(ready)], ["gpu05"]))
    events = wait_for(executor, started("kill-1"))
    wait_file(ready)
    executor.terminate("kill-1", 0, grace=2)
    events = wait_for(executor, ended("kill-1"), seen=events)

    assert wait_file(marker) == "ignored TERM\n"
    assert final(events, "kill-1").kind is EventKind.EXITED
    assert final(events, "kill-1").exit_code == 128 + 9
    rec = executor.store.get("kill-1", 0)
    assert rec is not None and rec.term_at is not None and rec.kill_sent_at is not None
    assert rec.kill_sent_at >= rec.term_at + 2
    assert executor.alive() == {}


def test_terminating_a_job_that_never_started_withdraws_it(executor: SlurmExecutor) -> None:
    # Pinned to a drained node, the job stays pending.
    executor.set_node_state("gpu06", "drain", "test: keep a job pending")
    try:
        executor.launch(spec("pend-1", ["sleep", "30"], ["gpu06"]))
        assert executor.alive() == {"pend-1": 0}
        executor.terminate("pend-1", 0, grace=30)
        events = wait_for(executor, ended("pend-1"))
    finally:
        executor.set_node_state("gpu06", "resume")
    assert kinds(events, "pend-1") == [EventKind.EXITED]
    assert final(events, "pend-1").exit_code is None
    assert executor.alive() == {}
