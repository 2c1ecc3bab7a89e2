"""Helpers for the Slurm executor tests: launch specs, waiting for events and files.

Owns: small conveniences shared by the test modules. Must not: mock Slurm or assert anything by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from allotment.core.model import Allocation
from allotment.executors.slurm import SlurmExecutor
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec


def spec(
    job_id: str,
    command: Sequence[str],
    nodes: Sequence[str],
    gpus: int = 1,
    attempt: int = 0,
    env: Mapping[str, str] | None = None,
    grace: int = 5,
    slice_end: int | None = None,
) -> LaunchSpec:
    return LaunchSpec(
        job_id=job_id,
        attempt=attempt,
        command=tuple(command),
        placement=tuple(Allocation(node=n, gpus=tuple(range(gpus))) for n in nodes),
        budget="physics",
        user="ada",
        kind="batch",
        grace=grace,
        slice_end=slice_end,
        env=dict(env or {}),
    )


def kinds(events: Sequence[ExecutorEvent], job_id: str, attempt: int = 0) -> list[EventKind]:
    return [e.kind for e in events if e.job_id == job_id and e.attempt == attempt]


def ended(job_id: str, attempt: int = 0) -> Callable[[list[ExecutorEvent]], bool]:
    def done(events: list[ExecutorEvent]) -> bool:
        return any(
            e.job_id == job_id and e.attempt == attempt and e.kind in (EventKind.EXITED, EventKind.LOST) for e in events
        )

    return done


def started(job_id: str, attempt: int = 0) -> Callable[[list[ExecutorEvent]], bool]:
    def done(events: list[ExecutorEvent]) -> bool:
        return any(e.job_id == job_id and e.attempt == attempt and e.kind is EventKind.STARTED for e in events)

    return done


def final(events: Sequence[ExecutorEvent], job_id: str, attempt: int = 0) -> ExecutorEvent:
    [event] = [
        e
        for e in events
        if e.job_id == job_id and e.attempt == attempt and e.kind in (EventKind.EXITED, EventKind.LOST)
    ]
    return event


def wait_for(
    ex: SlurmExecutor,
    done: Callable[[list[ExecutorEvent]], bool],
    timeout: float = 40.0,
    seen: list[ExecutorEvent] | None = None,
) -> list[ExecutorEvent]:
    """Poll until `done(all events so far)` holds; fails after `timeout` seconds (a hang, not a speed check)."""
    events = seen if seen is not None else []
    deadline = time.monotonic() + timeout
    while True:
        events.extend(ex.poll())
        if done(events):
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting; events so far: {events}")
        time.sleep(0.2)


def wait_file(path: Path, timeout: float = 40.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        if time.monotonic() > deadline:
            pytest.fail(f"{path} never appeared")
        time.sleep(0.1)
    return path.read_text()
