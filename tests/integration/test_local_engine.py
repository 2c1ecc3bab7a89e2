"""The engine with the local executor, end to end with real processes (issue 4): a job runs with exactly its GPUs
and Allotment's variables, its arguments arrive verbatim, exit codes are recorded; preempted jobs get SIGTERM, may
checkpoint, are SIGKILLed after their grace when they ignore it, are requeued unless they said not to, and resume
with their restart count incremented."""

from __future__ import annotations

import json
from pathlib import Path

from allotment.core.model import ContractClass, JobKind
from allotment.engine.setup import Built
from tests.integration.support import (
    BEHAVE,
    PY,
    REPORT,
    WEIRD_ARGS,
    add_job,
    cancel,
    final,
    job,
    lines,
    running,
    runs,
    step_until,
    wait_until,
)


def test_a_job_runs_with_its_gpus_and_environment_and_its_exit_code_is_recorded(local: Built, tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    env = {"FOO": "bar baz", "ALLOT_JOB_ID": "spoofed", "CUDA_VISIBLE_DEVICES": "7"}
    ok = add_job(local, "pretrain", "ben", [PY, "-c", REPORT, str(out), *WEIRD_ARGS], 3, env=env, grace=7)
    failing = add_job(local, "finetune", "chen", [PY, "-c", "import sys; sys.exit(3)"], 1)
    step_until(local, final(local, ok, failing), what="both jobs to end")

    [run] = runs(local, ok)
    [alloc] = run.placement
    report = json.loads((out / f"{alloc['node']}.json").read_text())
    e = report["env"]
    assert e["CUDA_VISIBLE_DEVICES"] == ",".join(str(g) for g in alloc["gpus"])
    assert len(alloc["gpus"]) == 3
    assert e["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert (e["ALLOT_JOB_ID"], e["ALLOT_BUDGET"], e["ALLOT_USER"], e["ALLOT_KIND"]) == (ok, "pretrain", "ben", "batch")
    assert (e["ALLOT_ATTEMPT"], e["ALLOT_RESTART_COUNT"], e["ALLOT_GRACE"]) == ("0", "0", "7")
    assert e["ALLOT_SLICE_END"] == str(run.slice_end) and run.slice_end is not None
    assert (e["ALLOT_NODE"], e["ALLOT_NODES"], e["ALLOT_GPUS"]) == (alloc["node"], alloc["node"], "3")
    assert (e["ALLOT_REPLICA"], e["ALLOT_REPLICAS"]) == ("0", "1")
    assert e["FOO"] == "bar baz"
    assert report["argv"] == WEIRD_ARGS
    assert not Path("/tmp/allot-pwned").exists()

    assert job(local, ok).state == "completed" and run.exit_code == 0
    assert job(local, failing).state == "failed"
    assert [r.exit_code for r in runs(local, failing)] == [3]


def test_preempted_jobs_get_term_then_kill_are_requeued_and_resume(local: Built, tmp_path: Path) -> None:
    # Three guaranteed jobs hold three whole nodes inside their slices: they cannot be preempted.
    fillers = [
        add_job(local, budget, user, ["sleep", "300"], 8, grace=1)
        for budget, user in (("pretrain", "ben"), ("finetune", "chen"), ("detection", "dana"))
    ]
    step_until(local, running(local, *fillers), what="the fillers to run")
    # The fourth node: opportunistic work that leaves within seconds (it may sit in session headroom).
    logs = {name: tmp_path / f"{name}.log" for name in ("checkpoints", "ignores", "no_requeue")}
    opp = ContractClass.OPPORTUNISTIC
    checkpoints = add_job(
        local,
        "segmentation",
        "eli",
        [PY, "-c", BEHAVE, str(logs["checkpoints"]), "checkpoint"],
        3,
        contract=opp,
        grace=5,
    )
    ignores = add_job(
        local, "detection", "eli", [PY, "-c", BEHAVE, str(logs["ignores"]), "ignore"], 3, contract=opp, grace=2
    )
    no_requeue = add_job(
        local,
        "finetune",
        "eli",
        [PY, "-c", BEHAVE, str(logs["no_requeue"]), "checkpoint"],
        2,
        contract=opp,
        grace=5,
        requeue=False,
    )
    victims = (checkpoints, ignores, no_requeue)
    step_until(local, running(local, *victims), what="the opportunistic jobs to run")
    wait_until(lambda: all(lines(p) for p in logs.values()), what="the opportunistic jobs to log their start")

    # A session needs the fourth node: every opportunistic job there is told to leave.
    session = add_job(local, "detection", "dana", ["sleep", "300"], 8, kind=JobKind.SESSION, slice_seconds=3600)
    step_until(local, running(local, session), what="the session to start")

    assert lines(logs["checkpoints"])[:3] == [
        f"0 {w} {runs(local, checkpoints)[0].placement[0]['node']}" for w in ("start", "term", "checkpoint")
    ]
    assert [line.split()[1] for line in lines(logs["ignores"])] == ["start", "term"]
    first = {v: runs(local, v)[0] for v in victims}
    assert first[checkpoints].exit_code == 0  # it checkpointed and left within its grace
    assert first[ignores].exit_code == 137  # it ignored SIGTERM: SIGKILL after its 2 s grace
    assert first[no_requeue].exit_code == 0
    assert all(r.preempt_reason is not None for r in first.values())
    assert job(local, no_requeue).state == "completed"  # requeue: false — not run again
    assert job(local, checkpoints).state == job(local, ignores).state == "pending"  # requeued automatically

    # The session ends (its owner cancels it): the requeued jobs resume with their restart count incremented.
    cancel(local, session)
    step_until(local, final(local, session, checkpoints, ignores), what="the session to end and the victims to resume")
    assert job(local, session).state == "cancelled" and runs(local, session)[0].exit_code == 143
    for victim, log in ((checkpoints, logs["checkpoints"]), (ignores, logs["ignores"])):
        assert lines(log)[-1].split()[:2] == ["1", "resumed"]
        assert [r.attempt for r in runs(local, victim)] == [0, 1]
        assert runs(local, victim)[1].exit_code == 0 and job(local, victim).state == "completed"
    assert len(runs(local, no_requeue)) == 1
    for filler in fillers:
        cancel(local, filler)
    step_until(local, final(local, *fillers), what="the fillers to end")
