"""Checkpoint reports on the real local Slurm cluster (rule `least-lost-work`, docs/executors.md "Checkpoints"):
each Slurm job gets $ALLOT_CHECKPOINT_FILE beside its output file; each touch is one CHECKPOINTED event of the
running attempt, at the file's modification time, reported once; a requeued run reports its own touches, never
its earlier run's (owner mode: test_slurm_run_as.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

from allotment.core.model import Allocation
from allotment.executors.slurm import SlurmExecutor
from allotment.ports.executor import EventKind, ExecutorEvent

from .helpers import ended, spec, wait_for

TOUCH_TWICE = 'touch "$ALLOT_CHECKPOINT_FILE"; sleep 2; touch "$ALLOT_CHECKPOINT_FILE"; sleep 60'


def _checkpoints(events: list[ExecutorEvent], job_id: str, attempt: int = 0) -> list[int]:
    return [e.at for e in events if (e.job_id, e.attempt, e.kind) == (job_id, attempt, EventKind.CHECKPOINTED)]


def _reported(n: int, job_id: str, attempt: int = 0) -> Callable[[list[ExecutorEvent]], bool]:
    return lambda events: len(_checkpoints(events, job_id, attempt)) >= n


def test_each_touch_of_the_checkpoint_file_is_one_report(executor: SlurmExecutor) -> None:
    before = int(time.time())
    executor.launch(spec("ck-1", ["bash", "-c", TOUCH_TWICE], ["gpu03"], gpus=0))
    events = wait_for(executor, _reported(2, "ck-1"))
    first, second = _checkpoints(events, "ck-1")
    assert before <= first < second <= int(time.time())
    started = next(e.at for e in events if e.kind is EventKind.STARTED)
    assert first >= started
    [rec] = executor.store.open_records()
    marker = executor.checkpoint_path(rec.name)
    assert marker.parent == executor.output_dir and int(marker.stat().st_mtime) == second
    time.sleep(1.5)
    assert _checkpoints(executor.poll(), "ck-1") == []  # each touch once
    executor.terminate("ck-1", 0, grace=1)
    wait_for(executor, ended("ck-1"))


def test_an_untouched_file_reports_nothing(executor: SlurmExecutor) -> None:
    executor.launch(spec("ck-quiet", ["bash", "-c", 'test -f "$ALLOT_CHECKPOINT_FILE"'], ["gpu03"], gpus=0))
    events = wait_for(executor, ended("ck-quiet"))
    assert [e.kind for e in events if e.job_id == "ck-quiet"] == [EventKind.STARTED, EventKind.EXITED]
    assert events[-1].exit_code == 0  # the file exists before the job runs


def test_a_requeued_run_reports_its_own_checkpoints_only(executor: SlurmExecutor) -> None:
    program = 'if [ "$ALLOT_ATTEMPT" = 0 ]; then touch "$ALLOT_CHECKPOINT_FILE"; sleep 1; exit 0; fi; sleep 3; ' + (
        'touch "$ALLOT_CHECKPOINT_FILE"; sleep 60'
    )
    executor.launch(spec("ck-rq", ["bash", "-c", program], ["gpu05"], gpus=0))
    events = wait_for(executor, ended("ck-rq"))
    [old] = _checkpoints(events, "ck-rq")

    executor.requeue("ck-rq", 1, [Allocation("gpu05", ())])
    later = wait_for(executor, _reported(1, "ck-rq", 1), timeout=60)
    [new] = _checkpoints(later, "ck-rq", 1)
    assert new > old
    assert _checkpoints(later, "ck-rq", 0) == []
    started = next(e.at for e in later if e.kind is EventKind.STARTED and e.attempt == 1)
    assert new >= started
    executor.terminate("ck-rq", 1, grace=1)
    wait_for(executor, ended("ck-rq", 1))
