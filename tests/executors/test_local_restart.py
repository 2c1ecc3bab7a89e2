"""The local executor across restarts: durable state, events delivered once, lost supervisors."""

from __future__ import annotations

import gc
import os
import signal
from pathlib import Path

import pytest

from allotment.executors.local import supervisor as sv
from allotment.ports.executor import EventKind

from .harness import Harness, finals

pytestmark = pytest.mark.timeout(60)

WAIT_FOR_GO = (
    "import pathlib, sys, time\n"
    "go = pathlib.Path(sys.argv[1])\n"
    "while not go.exists():\n"
    "    time.sleep(0.02)\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def _gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_a_new_executor_finds_the_running_attempt_and_reports_its_exit_once(harness: Harness, tmp_path: Path) -> None:
    go = tmp_path / "go"
    first = harness.executor()
    first.launch(harness.spec("long", WAIT_FOR_GO, str(go), "3", attempt=1))
    started = harness.events_until(first, lambda evs: len(evs) > 0, "STARTED")
    assert [(e.job_id, e.attempt, e.kind) for e in started] == [("long", 1, EventKind.STARTED)]
    del first
    gc.collect()

    second = harness.executor()  # the server restarted
    assert second.alive() == {"long": 1}
    assert second.poll() == []  # STARTED was delivered already
    go.touch()
    events = harness.until_final(second, "long")
    assert [(e.kind, e.exit_code) for e in events] == [(EventKind.EXITED, 3)]
    assert second.alive() == {}
    assert second.poll() == []
    assert harness.executor().poll() == []  # and never again, from any instance


def test_an_exit_while_nobody_watched_is_reported_by_the_next_instance(harness: Harness, tmp_path: Path) -> None:
    go = tmp_path / "go"
    first = harness.executor()
    first.launch(harness.spec("unwatched", WAIT_FOR_GO, str(go), "0"))
    assert first.alive() == {"unwatched": 0}
    job_record = first.attempt_dir("unwatched", 0) / sv.JOB
    harness.wait_until(job_record.exists, "the job to start")
    del first
    gc.collect()
    go.touch()
    record = harness.state_dir / "jobs" / "unwatched" / "0" / sv.EXIT
    harness.wait_until(record.exists, "the supervisor to record the exit")

    second = harness.executor()
    events = second.poll()
    assert [(e.kind, e.exit_code) for e in events] == [(EventKind.STARTED, None), (EventKind.EXITED, 0)]
    assert second.poll() == []


def test_a_supervisor_killed_with_sigkill_yields_lost_and_its_job_is_killed(harness: Harness, tmp_path: Path) -> None:
    ex = harness.executor()
    ex.launch(harness.spec("orphan", WAIT_FOR_GO, str(tmp_path / "never"), "0"))
    harness.events_until(ex, lambda evs: len(evs) > 0, "STARTED")
    d = ex.attempt_dir("orphan", 0)
    supervisor, job = sv.read_json(d / sv.SUPERVISOR), sv.read_json(d / sv.JOB)
    assert supervisor is not None and job is not None
    os.kill(int(supervisor["pid"]), signal.SIGKILL)

    events = harness.until_final(ex, "orphan")
    [final] = finals(events)
    assert final.kind is EventKind.LOST
    assert final.exit_code is None
    assert "supervisor vanished" in final.detail
    harness.wait_until(lambda: all(_gone(int(pid)) for pid in job["pids"]), "the orphaned job to be killed")
    assert ex.alive() == {}
    assert harness.executor().poll() == []


def test_terminate_deadline_survives_a_restart_of_the_executor(harness: Harness, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        "time.sleep(120)\n"
    )
    first = harness.executor()
    first.launch(harness.spec("deadline", code, str(ready), grace=1))
    harness.wait_until(ready.exists, "the job to ignore SIGTERM")
    first.terminate("deadline", 0, 1)
    stored = sv.read_json(first.attempt_dir("deadline", 0) / sv.TERMINATE)
    del first
    gc.collect()

    second = harness.executor()
    second.terminate("deadline", 0, 1)  # re-sent after the restart: the grace does not start over
    assert sv.read_json(second.attempt_dir("deadline", 0) / sv.TERMINATE) == stored
    events = harness.until_final(second, "deadline")
    assert [(e.kind, e.exit_code) for e in finals(events)] == [(EventKind.EXITED, 137)]
