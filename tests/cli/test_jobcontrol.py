"""Job control from the command line against a running server: `allot cancel` by filter (scancel -u/-A/-t/-n),
and `allot session` showing why it waits and withdrawing its request on Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import pytest

from tests.cli.conftest import Allot
from tests.sdk.live import wait_for

PY = sys.executable


def state(allot: Allot, user: str, job_id: str) -> str:
    return str(allot.json(user, "status", job_id)["state"])


def run(allot: Allot, user: str, budget: str, name: str, gpus: int = 8, replicas: int = 1) -> str:
    args = ("run", "--budget", budget, "--gpus", str(gpus), "--replicas", str(replicas), "--name", name)
    return str(allot.json(user, *args, "--", "sleep", "600")["job"]["id"])


def test_cancel_by_filter_reaches_only_the_matching_jobs_of_the_caller(allot: Allot) -> None:
    # 32 GPUs each: over pretrain's limit of 24, so they wait whatever else runs
    mine = [run(allot, "ben", "pretrain", "grid", replicas=4) for _ in range(2)]
    other = run(allot, "ben", "pretrain", "keep", replicas=4)
    chens = run(allot, "chen", "pretrain", "grid", replicas=4)
    dry = allot.json("ben", "cancel", "--name", "grid", "--dry-run")
    assert {j["id"] for j in dry["jobs"]} == set(mine) and dry["requested"] == 0
    assert "Would cancel 2 jobs" in allot("ben", "cancel", "--name", "grid", "--dry-run").stdout
    assert {state(allot, "ben", j) for j in mine} == {"pending"}
    shown = allot("ben", "cancel", "--user", "me", "--name", "grid", "--state", "pending").stdout
    assert "Cancel requested for 2 jobs" in shown and all(j in shown for j in mine)
    wait_for(lambda: {state(allot, "ben", j) for j in mine} == {"cancelled"}, "the filtered jobs to end")
    assert state(allot, "ben", other) == "pending" and state(allot, "chen", chens) == "pending"
    assert "no active job matches" in allot("ben", "cancel", "--name", "grid").stdout
    assert "administrators only" in allot("ben", "cancel", "--user", "chen", code=4).stderr
    assert "not both" in allot("ben", "cancel", other, "--name", "keep", code=2).stderr
    assert "give job ids, or filters" in allot("ben", "cancel", code=2).stderr
    assert "not an active state" in allot("ben", "cancel", "--state", "completed", code=2).stderr
    admin = allot.json("ada", "cancel", "--budget", "pretrain", "--state", "pending")
    assert {other, chens} <= {j["id"] for j in admin["jobs"]}
    wait_for(lambda: state(allot, "ada", chens) == "cancelled", "the administrator's cancellation")


@contextmanager
def session_process(allot: Allot, *args: str) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """`allot session ARGS…` as a real process whose stderr (not a terminal) is read line by line."""
    env = {**os.environ, **{k: v for k, v in allot.env("eli").items() if v is not None}}
    env.pop("ALLOT_CONFIG", None)
    proc = subprocess.Popen(
        [PY, "-m", "allotment.cli", "session", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)

    reader = threading.Thread(target=read, args=(proc.stderr,), daemon=True)
    reader.start()
    try:
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        reader.join(timeout=10)


def next_line(lines: queue.Queue[str], containing: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no line with {containing!r} on stderr")
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if containing in line:
            return line


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_waiting_session_shows_why_and_withdraws_its_request_when_interrupted(
    allot: Allot, sig: signal.Signals, code: int
) -> None:
    holder = run(allot, "eli", "segmentation", "holder")  # segmentation's limit is 8 GPUs: the session must wait
    wait_for(lambda: state(allot, "eli", holder) == "running", "the holder to run")
    try:
        with session_process(allot, "--budget", "segmentation", "--gpus", "1", "--timeout", "120") as (proc, lines):
            first = next_line(lines, "waited")
            assert "session j-" in first and "pending" in first
            reason = next_line(lines, "limit of 8")  # the engine's reason, in numbers, as soon as it is written
            job_id = reason.split("session ", 1)[1].split(":", 1)[0]
            proc.send_signal(sig)
            assert proc.wait(timeout=30) == code
            said = next_line(lines, "withdrew session")
            assert job_id in said
        wait_for(lambda: state(allot, "eli", job_id) == "cancelled", "the withdrawn request to end")
    finally:
        allot("eli", "cancel", holder)
    wait_for(lambda: state(allot, "eli", holder) == "cancelled", "the holder to end")


def test_queue_watch_redraws_until_its_count_and_refuses_what_cannot_be_live(allot: Allot) -> None:
    job = run(allot, "ben", "pretrain", "watched", replicas=4)  # over pretrain's limit: it stays pending
    try:
        shown = allot("ben", "queue", "--mine", "--watch", "--interval", "0.5", "--count", "3").stdout
        assert shown.count("(every 0.5s)") == 3 and shown.count("Queue (") == 3 and shown.count(job) == 3
        assert "not with --json" in allot("ben", "queue", "--watch", "--json", code=2).stderr
        assert "not with --json" in allot("ben", "queue", "--watch", "--state", "completed", code=2).stderr
        assert allot("ben", "queue", "--watch", "--interval", "0.1", code=2).stderr  # below the 0.5 s floor
    finally:
        allot("ben", "cancel", job)
