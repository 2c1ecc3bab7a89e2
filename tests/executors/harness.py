"""The local-executor test harness: builds LocalExecutors on a temporary state directory, waits for their
events with a timeout, and kills and reaps every process a test left behind (the `harness` fixture)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from allotment.core.model import Allocation
from allotment.executors.local import LocalExecutor
from allotment.executors.local import supervisor as sv
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec

NODE = "node-a"
WAIT = 20.0
"""Generous upper bound for anything a test waits for (the suite runs on small, shared machines)."""


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_dir = root / "state"

    def executor(self, nodes: Sequence[str] = (NODE,), base_env: Mapping[str, str] | None = None) -> LocalExecutor:
        return LocalExecutor(self.state_dir, nodes, base_env=base_env)

    def spec(
        self,
        job_id: str,
        *code_and_args: str,
        attempt: int = 0,
        gpus: tuple[int, ...] = (),
        node: str = NODE,
        grace: int = 30,
        env: Mapping[str, str] | None = None,
        placement: tuple[Allocation, ...] | None = None,
    ) -> LaunchSpec:
        """A job running `python -c code args...`."""
        return LaunchSpec(
            job_id=job_id,
            attempt=attempt,
            command=(sys.executable, "-c", *code_and_args),
            placement=placement if placement is not None else (Allocation(node, gpus),),
            budget="physics",
            user="ada",
            kind="batch",
            grace=grace,
            slice_end=1_900_000_000,
            env=dict(env or {}),
        )

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.02)

    def events_until(
        self, ex: LocalExecutor, done: Callable[[list[ExecutorEvent]], bool], what: str
    ) -> list[ExecutorEvent]:
        """Poll `ex` until `done(all events so far)`; returns every event seen."""
        seen: list[ExecutorEvent] = []

        def step() -> bool:
            seen.extend(ex.poll())
            return done(seen)

        self.wait_until(step, what)
        return seen

    def until_final(self, ex: LocalExecutor, job_id: str) -> list[ExecutorEvent]:
        return self.events_until(
            ex,
            lambda evs: any(e.job_id == job_id and e.kind in (EventKind.EXITED, EventKind.LOST) for e in evs),
            f"{job_id} to end",
        )

    def cleanup(self) -> None:
        jobs = self.state_dir / "jobs"
        for record in sorted(jobs.glob(f"*/*/{sv.JOB}")) if jobs.exists() else []:
            job = sv.read_json(record)
            if job is not None:
                sv.signal_group(int(job["pgid"]), signal.SIGKILL)
        for record in sorted(jobs.glob(f"*/*/{sv.SUPERVISOR}")) if jobs.exists() else []:
            sup = sv.read_json(record)
            if sup is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(sup["pid"]), signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(int(sup["pid"]), 0)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        h.cleanup()


def finals(events: list[ExecutorEvent]) -> list[ExecutorEvent]:
    """The EXITED and LOST events among `events`."""
    return [e for e in events if e.kind in (EventKind.EXITED, EventKind.LOST)]


def of_kind(events: list[ExecutorEvent], kind: EventKind) -> list[ExecutorEvent]:
    return [e for e in events if e.kind is kind]
