"""The local executor's output: the supervisor copies each replica's pipe into log files the job cannot reach,
labels a gang's lines, survives the server going away, and never lets output (or its absence) wedge an attempt."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from allotment.core.model import Allocation
from allotment.executors.local import supervisor as sv
from allotment.ports.executor import EventKind

from .harness import NODE, Harness, finals

pytestmark = pytest.mark.timeout(60)

GANG = (Allocation("node-a", (0,)), Allocation("node-b", (1,)))

SAY_LINES = (
    "import os, sys\n"
    "r = os.environ['ALLOT_REPLICA']\n"
    "for i in range(3):\n"
    "    print(f'replica {r} line {i}', flush=True)\n"
    "print(f'replica {r} to stderr', file=sys.stderr, flush=True)\n"
    "sys.stdout.write(f'replica {r} no newline')\n"
)


def _kill(pid_file: Path) -> None:
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_gang_has_each_replicas_lines_once_labelled_and_its_own_file_each(harness: Harness) -> None:
    ex = harness.executor(nodes=("node-a", "node-b"))
    ex.launch(harness.spec("gang", SAY_LINES, placement=GANG))
    [final] = finals(harness.until_final(ex, "gang"))
    assert final.exit_code == 0
    combined = ex.log_path("gang", 0).read_text().splitlines()
    for r in (0, 1):
        mine = [f"replica {r} line {i}" for i in range(3)] + [f"replica {r} to stderr", f"replica {r} no newline"]
        assert [line for line in combined if line.startswith(f"{r}: ")] == [f"{r}: {line}" for line in mine]
        assert ex.log_path("gang", 0, replica=r).read_text() == "\n".join(mine)
    assert len(combined) == 10  # every line once, nothing unlabelled
    with pytest.raises(ValueError, match="no replica 2"):
        ex.log_path("gang", 0, replica=2)


def test_a_single_replica_writes_one_unlabelled_file(harness: Harness) -> None:
    ex = harness.executor()
    ex.launch(harness.spec("solo", SAY_LINES))
    harness.until_final(ex, "solo")
    text = ex.log_path("solo", 0).read_text()
    assert text.splitlines()[0] == "replica 0 line 0" and text.endswith("replica 0 no newline")
    assert ex.log_path("solo", 0, replica=0) == ex.log_path("solo", 0)
    assert not (ex.attempt_dir("solo", 0) / sv.replica_output(0)).exists()


def test_output_written_after_the_server_died_is_kept(harness: Harness, tmp_path: Path) -> None:
    go, ready = tmp_path / "go", tmp_path / "ready"
    code = (
        "import pathlib, sys, time\n"
        "print('before', flush=True)\n"
        "pathlib.Path(sys.argv[2]).touch()\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.02)\n"
        "print('after the server died', flush=True)\n"
    )
    spec = harness.spec("outlives", code, str(go), str(ready))
    server = (
        "import sys\n"
        "from allotment.executors.local import LocalExecutor\n"
        "from allotment.core.model import Allocation\n"
        "from allotment.ports.executor import LaunchSpec\n"
        f"spec = LaunchSpec(job_id='outlives', attempt=0, command={spec.command!r},"
        f" placement=(Allocation({NODE!r}, ()),), budget='physics', user='ada', kind='batch', grace=30,"
        " slice_end=None)\n"
        f"LocalExecutor({str(harness.state_dir)!r}, [{NODE!r}]).launch(spec)\n"
    )
    subprocess.run([sys.executable, "-c", server], check=True, timeout=30)  # the "server" exits: gone for good
    harness.wait_until(ready.exists, "the job to start")
    go.touch()
    ex = harness.executor()
    [final] = finals(harness.until_final(ex, "outlives"))
    assert final.exit_code == 0
    assert ex.log_path("outlives", 0).read_text().splitlines() == ["before", "after the server died"]


def test_a_job_that_closes_its_output_early_still_ends_on_terminate(harness: Harness, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (
        "import os, pathlib, sys, time\n"
        "print('last words', flush=True)\n"
        "os.close(1); os.close(2)\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        "time.sleep(120)\n"
    )
    ex = harness.executor()
    ex.launch(harness.spec("quiet", code, str(ready), grace=1))
    harness.wait_until(ready.exists, "the job to close its output")
    ex.terminate("quiet", 0, 1)
    [final] = finals(harness.until_final(ex, "quiet"))
    assert (final.kind, final.exit_code) == (EventKind.EXITED, 143)
    assert ex.log_path("quiet", 0).read_text() == "last words\n"


def test_a_flood_of_output_never_delays_the_kill(harness: Harness, tmp_path: Path) -> None:
    ready = tmp_path
    code = (
        "import os, pathlib, signal, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "pathlib.Path(sys.argv[1], os.environ['ALLOT_REPLICA']).touch()\n"
        "line = 'x' * 1000 + '\\n'\n"
        "while True: sys.stdout.write(line)\n"
    )
    ex = harness.executor(nodes=("node-a", "node-b"))
    ex.launch(harness.spec("flood", code, str(ready), grace=0, placement=GANG))
    harness.wait_until(lambda: (ready / "0").exists() and (ready / "1").exists(), "both replicas to flood")
    ex.terminate("flood", 0, 1)
    [final] = finals(harness.until_final(ex, "flood"))
    assert (final.kind, final.exit_code) == (EventKind.EXITED, 137)
    for log in ex.attempt_dir("flood", 0).glob("output*.log"):
        assert log.stat().st_size > 0 or log.name != sv.OUTPUT
        log.unlink()  # hundreds of megabytes: give the shared disk back now


@pytest.mark.parametrize(
    "escape",
    [
        pytest.param(False, id="child-in-the-job-group"),
        pytest.param(True, id="child-that-left-the-group"),
    ],
)
def test_a_child_that_keeps_the_pipe_open_does_not_wedge_the_attempt(
    harness: Harness, tmp_path: Path, escape: bool
) -> None:
    child_pid = tmp_path / "child.pid"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    if sys.argv[2] == 'escape': os.setsid()\n"
        "    open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "    print('child here', flush=True)\n"
        "    time.sleep(120)\n"
        "    os._exit(0)\n"
        "while not os.path.exists(sys.argv[1]) or not open(sys.argv[1]).read(): time.sleep(0.01)\n"
        "print('parent done', flush=True)\n"
    )
    ex = harness.executor()
    try:
        ex.launch(harness.spec("forker", code, str(child_pid), "escape" if escape else "stay"))
        [final] = finals(harness.until_final(ex, "forker"))
        assert (final.kind, final.exit_code) == (EventKind.EXITED, 0)
        assert sorted(ex.log_path("forker", 0).read_text().splitlines()) == ["child here", "parent done"]
        if not escape:  # nothing of the attempt outlives it
            pid = int(child_pid.read_text())
            harness.wait_until(lambda: _gone(pid), "the child to be killed with its group")
    finally:
        _kill(child_pid)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize(
    "replace",
    [
        pytest.param("os.mkfifo(p)", id="fifo"),
        pytest.param("os.symlink(sys.argv[1], p)", id="symlink"),
    ],
)
def test_a_job_that_replaces_its_log_cannot_make_the_supervisor_write_elsewhere(
    harness: Harness, tmp_path: Path, replace: str
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    code = (
        "import os, sys\n"
        "p = 'output.log'\n"  # the job's working directory is its attempt directory
        "os.unlink(p)\n"
        f"{replace}\n"
        "print('written after the swap', flush=True)\n"
    )
    ex = harness.executor()
    ex.launch(harness.spec("swapper", code, str(victim)))
    [final] = finals(harness.until_final(ex, "swapper"))
    assert final.exit_code == 0
    assert victim.read_text() == "untouched\n"
