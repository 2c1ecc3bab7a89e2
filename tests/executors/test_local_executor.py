"""The local executor with real processes: environment, argv, signals, idempotent launch, logs, refusals."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from allotment.core.model import Allocation
from allotment.executors.local import supervisor as sv
from allotment.ports.executor import EventKind, ExecutorEvent

from .harness import NODE, Harness, finals, of_kind

pytestmark = pytest.mark.timeout(60)

DUMP_ENV = (
    "import json, os, sys\n"
    "keys = [k for k in os.environ if k.startswith(('ALLOT_', 'CUDA_')) or k in ('FOO', 'KEEP')]\n"
    "json.dump({k: os.environ[k] for k in keys}, open(sys.argv[1], 'w'))\n"
)

WAIT_FOR_TERM = (
    "import pathlib, signal, sys, time\n"
    "mode, ready = sys.argv[1], pathlib.Path(sys.argv[2])\n"
    "if mode == 'handle':\n"
    "    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
    "else:\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "ready.touch()\n"
    "time.sleep(120)\n"
)


@pytest.mark.parametrize("gpus", [(1, 3), ()], ids=["two-gpus", "no-gpu"])
def test_job_sees_exactly_its_gpus_and_allot_variables(harness: Harness, tmp_path: Path, gpus: tuple[int, ...]) -> None:
    # The server's own environment carries stale values that must not leak into the job.
    base = {"PATH": os.environ.get("PATH", ""), "KEEP": "1", "ALLOT_JOB_ID": "stale", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    ex = harness.executor(base_env=base)
    out = tmp_path / "env.json"
    spec = harness.spec(
        "env-job", DUMP_ENV, str(out), attempt=2, gpus=gpus, env={"FOO": "bar", "ALLOT_USER": "mallory"}
    )
    ex.launch(spec)
    events = harness.until_final(ex, "env-job")
    assert [(e.kind, e.exit_code) for e in finals(events)] == [(EventKind.EXITED, 0)]
    seen = json.loads(out.read_text())
    assert seen == {
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in gpus),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "ALLOT_JOB_ID": "env-job",
        "ALLOT_ATTEMPT": "2",
        "ALLOT_RESTART_COUNT": "2",
        "ALLOT_BUDGET": "physics",
        "ALLOT_USER": "ada",
        "ALLOT_KIND": "batch",
        "ALLOT_GRACE": "30",
        "ALLOT_SLICE_END": "1900000000",
        "ALLOT_NODE": NODE,
        "ALLOT_GPUS": str(len(gpus)),
        "ALLOT_NODES": NODE,
        "ALLOT_REPLICA": "0",
        "ALLOT_REPLICAS": "1",
        "ALLOT_CHECKPOINT_FILE": str(ex.attempt_dir("env-job", 2) / "allot-checkpoint"),
        "FOO": "bar",
        "KEEP": "1",
    }


SAVE_TWICE = (
    "import os, pathlib, sys, time\n"
    "marker, done = pathlib.Path(os.environ['ALLOT_CHECKPOINT_FILE']), pathlib.Path(sys.argv[1])\n"
    "marker.touch()\n"
    "os.utime(marker, (1_900_000_100, 1_900_000_100))\n"
    "while not done.exists():\n"
    "    time.sleep(0.05)\n"
    "os.utime(marker, (1_900_000_200, 1_900_000_200))\n"
    "time.sleep(120)\n"
)


def test_a_job_reports_each_checkpoint_by_touching_its_checkpoint_file(harness: Harness, tmp_path: Path) -> None:
    """Rule `least-lost-work`: each change of $ALLOT_CHECKPOINT_FILE's modification time is one CHECKPOINTED event
    at that time; an unchanged file reports nothing again."""
    ex = harness.executor()
    go_on = tmp_path / "go-on"
    ex.launch(harness.spec("saver", SAVE_TWICE, str(go_on)))

    def saved(evs: list[ExecutorEvent]) -> bool:
        return any(e.kind is EventKind.CHECKPOINTED for e in evs)

    first = harness.events_until(ex, saved, "the first checkpoint")
    assert [e.at for e in of_kind(first, EventKind.CHECKPOINTED)] == [1_900_000_100]
    assert of_kind(ex.poll(), EventKind.CHECKPOINTED) == []
    go_on.touch()
    second = harness.events_until(ex, saved, "the second checkpoint")
    assert [e.at for e in of_kind(second, EventKind.CHECKPOINTED)] == [1_900_000_200]
    ex.terminate("saver", 0, 0)
    harness.until_final(ex, "saver")


def test_argv_arrives_verbatim_and_is_never_run_through_a_shell(harness: Harness, tmp_path: Path) -> None:
    tricky = [
        "two words",
        'it\'s "quoted"',
        "a; touch semicolon-ran",
        "$(touch subshell-ran)",
        "`touch backtick-ran`",
        "line one\nline two",
        "*",
        "?.py",
        "$HOME",
        "a && b || c | d > e",
        "",
        " ",
        "ünïcødé",
    ]
    out = tmp_path / "argv.json"
    workdir = tmp_path / "work"
    workdir.mkdir()
    spec = harness.spec("argv-job", "import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], 'w'))", str(out))
    spec = replace(spec, command=(*spec.command, *tricky), workdir=str(workdir))
    ex = harness.executor()
    ex.launch(spec)
    harness.until_final(ex, "argv-job")
    assert json.loads(out.read_text()) == tricky
    assert sorted(p.name for p in workdir.iterdir()) == []  # nothing was expanded or executed


def test_job_handling_sigterm_exits_within_grace_with_its_own_code(harness: Harness, tmp_path: Path) -> None:
    ex = harness.executor()
    ready = tmp_path / "ready"
    ex.launch(harness.spec("polite", WAIT_FOR_TERM, "handle", str(ready), grace=60))
    harness.wait_until(ready.exists, "the job to install its SIGTERM handler")
    ex.terminate("polite", 0, 60)
    events = harness.until_final(ex, "polite")
    [final] = finals(events)
    assert (final.kind, final.exit_code) == (EventKind.EXITED, 7)
    assert "after SIGTERM" in final.detail


def test_job_ignoring_sigterm_is_killed_after_grace(harness: Harness, tmp_path: Path) -> None:
    ex = harness.executor()
    ready = tmp_path / "ready"
    ex.launch(harness.spec("stubborn", WAIT_FOR_TERM, "ignore", str(ready), grace=1))
    harness.wait_until(ready.exists, "the job to ignore SIGTERM")
    ex.terminate("stubborn", 0, 1)
    record = sv.read_json(ex.attempt_dir("stubborn", 0) / sv.TERMINATE)
    assert record is not None
    ex.terminate("stubborn", 0, 1)  # repeating does not restart the grace
    assert sv.read_json(ex.attempt_dir("stubborn", 0) / sv.TERMINATE) == record
    events = harness.until_final(ex, "stubborn")
    [final] = finals(events)
    assert (final.kind, final.exit_code) == (EventKind.EXITED, 128 + 9)
    assert "SIGKILL" in final.detail


def test_launching_twice_runs_one_process(harness: Harness, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    code = "import os, sys; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n')"
    spec = harness.spec("once", code, str(runs))
    ex = harness.executor()
    ex.launch(spec)
    ex.launch(spec)
    harness.executor().launch(spec)  # a second instance re-sending the intent after a crash
    events = harness.until_final(ex, "once")
    ex.launch(spec)  # after it finished, too
    events += harness.events_until(ex, lambda _evs: True, "a last poll")
    assert len(runs.read_text().splitlines()) == 1
    assert [e.kind for e in events] == [EventKind.STARTED, EventKind.EXITED]


def test_stdout_and_stderr_go_to_the_attempt_log(harness: Harness) -> None:
    code = "import sys; print('to stdout', flush=True); print('to stderr', file=sys.stderr, flush=True); sys.exit(4)"
    ex = harness.executor()
    ex.launch(harness.spec("chatty", code))
    [final] = finals(harness.until_final(ex, "chatty"))
    assert final.exit_code == 4
    log = ex.log_path("chatty", 0)
    assert log == ex.state_dir / "jobs" / "chatty" / "0" / "output.log"
    assert log.read_text().splitlines() == ["to stdout", "to stderr"]


def test_placement_on_a_node_it_does_not_manage_is_lost(harness: Harness) -> None:
    ex = harness.executor(nodes=("node-a",))
    ex.launch(harness.spec("elsewhere", "print('must not run')", node="node-b"))
    events = ex.poll()
    assert [(e.job_id, e.kind) for e in events] == [("elsewhere", EventKind.LOST)]
    assert "node-b" in events[0].detail
    assert ex.poll() == []
    assert ex.alive() == {}
    assert not ex.log_path("elsewhere", 0).exists()


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        pytest.param(("{tmp}/no-such-program", "arg"), {}, "no-such-program", id="no-such-program"),
        # The API refuses NUL bytes (422); one that reached a stored spec anyway must end the attempt, not make the
        # supervisor crash and the attempt come back as a lost node, relaunched about once a second, forever.
        pytest.param(("true", "a\0b"), {}, "null byte", id="nul-in-an-argument"),
        pytest.param(("true",), {"KEY": "a\0b"}, "null byte", id="nul-in-the-environment"),
    ],
)
def test_a_program_that_cannot_start_exits_127(
    harness: Harness, tmp_path: Path, argv: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    ex = harness.executor()
    spec = harness.spec("missing", "")
    spec = replace(spec, command=tuple(a.format(tmp=tmp_path) for a in argv), env=env)
    ex.launch(spec)
    events = harness.until_final(ex, "missing")
    assert [(e.kind, e.exit_code) for e in events] == [(EventKind.EXITED, 127)]
    assert says in ex.log_path("missing", 0).read_text()


def test_a_gang_runs_one_process_per_allocation_and_a_failure_ends_it(harness: Harness, tmp_path: Path) -> None:
    code = (
        "import os, pathlib, sys, time\n"
        "d = pathlib.Path(sys.argv[1])\n"
        "e = os.environ\n"
        "(d / e['ALLOT_REPLICA']).write_text(e['ALLOT_NODE'] + ' ' + e['CUDA_VISIBLE_DEVICES'])\n"
        "if os.environ['ALLOT_REPLICA'] == '1':\n"
        "    while not (d / '0').exists(): time.sleep(0.01)\n"
        "    sys.exit(5)\n"
        "time.sleep(120)\n"
    )
    placement = (Allocation("node-a", (0, 1)), Allocation("node-b", (2, 3)))
    ex = harness.executor(nodes=("node-a", "node-b"))
    ex.launch(harness.spec("gang", code, str(tmp_path), grace=1, placement=placement))
    events = harness.until_final(ex, "gang")
    assert [(e.kind, e.exit_code) for e in events] == [(EventKind.STARTED, None), (EventKind.EXITED, 5)]
    assert (tmp_path / "0").read_text() == "node-a 0,1"
    assert (tmp_path / "1").read_text() == "node-b 2,3"


def test_terminate_of_unknown_or_finished_attempts_is_a_no_op(harness: Harness) -> None:
    ex = harness.executor()
    ex.terminate("never-launched", 0, 5)
    ex.launch(harness.spec("quick", "pass"))
    harness.until_final(ex, "quick")
    ex.terminate("quick", 0, 5)
    assert not (ex.attempt_dir("quick", 0) / sv.TERMINATE).exists()
    assert of_kind(ex.poll(), EventKind.EXITED) == []


def test_job_ids_must_be_path_safe(harness: Harness) -> None:
    ex = harness.executor()
    with pytest.raises(ValueError, match="path-safe"):
        ex.launch(harness.spec("../escape", "pass"))
