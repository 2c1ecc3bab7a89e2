"""Durability and requeue on the real local cluster.

Covers: a new executor instance on the same state directory (Allotment restarted) finds its running jobs, emits
nothing twice, reports what ended while it was away, and can terminate what the old one launched; requeue runs
the next attempt in the same Slurm job, on the chosen node, with the new attempt number and slice end.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from allotment.core.model import Allocation
from allotment.executors.slurm import SlurmExecutor
from allotment.ports.executor import EventKind

from .helpers import ended, final, kinds, spec, started, wait_for


def test_a_restarted_executor_reconciles_its_jobs(slurm_conf: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = SlurmExecutor(state, slurm_conf)
    second: SlurmExecutor | None = None
    try:
        first.launch(spec("long-1", ["sleep", "60"], ["gpu04"]))
        first.launch(spec("short-1", ["bash", "-c", "exit 5"], ["gpu04"]))
        before = wait_for(first, started("long-1"))
        # From here on, `first` is never called again: the old Allotment is gone.

        # Let short-1 finish while "Allotment is down".
        deadline = time.monotonic() + 30
        while "short" in first.cli.run(["squeue", "-h", "-o", "%j"]) and time.monotonic() < deadline:
            time.sleep(0.2)

        second = SlurmExecutor(state, slurm_conf)
        assert second.alive() == {"long-1": 0}
        second.launch(spec("long-1", ["sleep", "60"], ["gpu04"]))  # re-sent intent: a no-op
        # short-1 may have ended before `first` stopped polling: whoever saw it reports it, once.
        events = wait_for(second, ended("short-1"), seen=list(before))[len(before) :]
        assert kinds(events, "long-1") == []  # STARTED was emitted before the restart
        # Whatever the old executor already reported is not reported again.
        assert kinds(before + events, "short-1") == [EventKind.STARTED, EventKind.EXITED]
        assert final(before + events, "short-1").exit_code == 5

        second.terminate("long-1", 0, grace=5)
        events = wait_for(second, ended("long-1"))
        assert kinds(events, "long-1") == [EventKind.EXITED]
        assert second.alive() == {}
    finally:
        last = second or first
        for rec in last.store.open_records():
            if rec.slurm_id is not None:
                last.cli.scancel(str(rec.slurm_id))
        first.close()
        if second is not None:
            second.close()


def test_requeue_keeps_the_slurm_job(executor: SlurmExecutor) -> None:
    program = 'echo "attempt=$ALLOT_ATTEMPT restart=$ALLOT_RESTART_COUNT slice_end=$ALLOT_SLICE_END on $ALLOT_NODE"'
    s = spec("rq-1", ["bash", "-c", program], ["gpu04"], slice_end=1000)
    executor.launch(s)
    wait_for(executor, ended("rq-1"))
    slurm_id = executor.slurm_job_id("rq-1", 0)

    # Same node right away: the pause before release avoids "Job credential revoked".
    executor.requeue("rq-1", 1, [Allocation("gpu04", (0,))], slice_end=2000)
    events = wait_for(executor, ended("rq-1", 1))
    assert kinds(events, "rq-1", 1) == [EventKind.STARTED, EventKind.EXITED]
    assert final(events, "rq-1", 1).exit_code == 0
    assert executor.slurm_job_id("rq-1", 1) == slurm_id

    executor.requeue("rq-1", 2, [Allocation("gpu01", (0,))], slice_end=None)
    events = wait_for(executor, ended("rq-1", 2))
    assert executor.slurm_job_id("rq-1", 2) == slurm_id
    placement = executor.placement("rq-1", 2)
    assert placement is not None and [a.node for a in placement] == ["gpu01"]

    lines = executor.output_path("rq-1", 0).read_text().splitlines()
    assert [line for line in lines if line.startswith("attempt=")] == [
        "attempt=0 restart=0 slice_end=1000 on gpu04",
        "attempt=1 restart=1 slice_end=2000 on gpu04",
        "attempt=2 restart=2 slice_end= on gpu01",
    ]


def test_requeue_refuses_while_the_previous_attempt_runs(executor: SlurmExecutor) -> None:
    executor.launch(spec("rq-2", ["sleep", "60"], ["gpu01"]))
    with pytest.raises(ValueError):
        executor.requeue("rq-2", 1, [Allocation("gpu01", (0,))])
    with pytest.raises(ValueError):
        executor.requeue("rq-none", 1, [Allocation("gpu01", (0,))])
