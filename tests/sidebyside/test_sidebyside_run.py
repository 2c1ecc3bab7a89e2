"""The 2-minute side-by-side run on real Slurm daemons, slurmdbd and MariaDB: both runs completed every job, and
the report's numbers agree with the event log they were computed from.

Each check reads the report (report.json) and the merged event log of each run (events.jsonl: submit, start, term,
killed, done per job; drain and empty), written by benchmarks.sidebyside from the jobs' own records. The run takes
about two minutes, so it happens once, in one test item (several items could land on different pytest-xdist
workers, one of them waiting for the other's run), and every check is a named function called for both runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from benchmarks.sidebyside.workload import DRAIN_NODE, GPUS_PER_NODE, NODES, QUICK, Kind, generate

from tests.sidebyside.conftest import report

RUNS = ["slurm", "allotment"]
PLANS = generate(QUICK)


def events(workdir: Path, run: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (workdir / run / "events.jsonl").read_text().splitlines()]


def metrics(workdir: Path, run: str) -> dict[str, Any]:
    return report(workdir)[RUNS.index(run)]


def check_every_job_completed(workdir: Path, run: str) -> None:
    m = metrics(workdir, run)
    done = {e["job"] for e in events(workdir, run) if e["ev"] == "done"}
    assert done == {p.name for p in PLANS}
    assert m["completed"] == m["jobs"] == len(PLANS)
    assert json.loads((workdir / run / "run.json").read_text())["timed_out"] is False


def check_shares_and_utilisation_are_fractions(workdir: Path, run: str) -> None:
    m = metrics(workdir, run)
    assert 0 < m["utilisation"] <= 1
    assert math.isclose(sum(m["received"].values()), 1.0, abs_tol=1e-9)
    assert math.isclose(sum(m["entitled"].values()), 1.0, abs_tol=1e-9)
    assert set(m["received"]) == set(m["entitled"]) == {p.account for p in PLANS}


def check_preemptions_match_the_event_log(workdir: Path, run: str) -> None:
    m, log = metrics(workdir, run), events(workdir, run)
    assert m["preemptions"] == sum(1 for e in log if e["ev"] in ("term", "killed"))
    assert m["killed"] == sum(1 for e in log if e["ev"] == "killed")
    gpus = {p.name: p.total_gpus for p in PLANS}
    assert math.isclose(m["work_lost_gpu_s"], sum(e["lost"] * gpus[e["job"]] for e in log if "lost" in e))
    # every segment ended (preempted, killed or done) and every job's last record is `done`: a preemption never
    # loses a job; runs started after the job had finished are counted as reruns
    per_job: dict[str, list[str]] = {p.name: [] for p in PLANS}
    for e in log:
        if e.get("job") and e["ev"] != "submit":
            per_job[e["job"]].append(e["ev"])
    for evs in per_job.values():
        assert evs.count("start") == sum(evs.count(x) for x in ("term", "killed", "done"))
        assert evs[-1] == "done"
    assert m["reruns"] == sum(evs.count("done") - 1 for evs in per_job.values())


def check_gpus_never_overcommitted(workdir: Path, run: str) -> None:
    held, peak = 0, 0
    gpus = {p.name: p.total_gpus for p in PLANS}
    for e in events(workdir, run):
        if e["ev"] == "start":
            held += gpus[e["job"]]
        elif e["ev"] in ("term", "killed", "done"):
            held -= gpus[e["job"]]
        peak = max(peak, held)
    assert held == 0
    assert peak <= NODES * GPUS_PER_NODE


def check_latencies_come_from_submissions_and_starts(workdir: Path, run: str) -> None:
    m, log = metrics(workdir, run), events(workdir, run)
    submit = {e["job"]: e["t"] for e in log if e["ev"] == "submit"}
    first: dict[str, float] = {}
    for e in log:
        if e["ev"] == "start":
            first.setdefault(e["job"], e["t"])
    assert all(first[j] >= submit[j] for j in first)
    sessions = sorted(first[p.name] - submit[p.name] for p in PLANS if p.kind is Kind.SESSION)
    assert m["session_p50"] in sessions and m["session_p95"] in sessions
    assert m["session_p50"] <= m["session_p95"] == sessions[math.ceil(0.95 * len(sessions)) - 1]
    gangs = sorted(first[p.name] - submit[p.name] for p in PLANS if p.nodes >= 4)
    assert m["large_gang_wait"] == pytest.approx(gangs)


def check_the_drained_node_emptied_and_took_nothing_new(workdir: Path, run: str) -> None:
    m, log = metrics(workdir, run), events(workdir, run)
    [drain] = [e["t"] for e in log if e["ev"] == "drain"]
    [empty] = [e["t"] for e in log if e["ev"] == "empty"]
    assert m["drain_to_empty"] == pytest.approx(empty - drain)
    assert empty >= drain
    assert not [e for e in log if e["ev"] == "start" and drain < e["t"] < empty and DRAIN_NODE in e["nodes"]]


def test_side_by_side_quick_run(sbs_run: Path) -> None:
    for run in RUNS:
        check_every_job_completed(sbs_run, run)
        check_shares_and_utilisation_are_fractions(sbs_run, run)
        check_preemptions_match_the_event_log(sbs_run, run)
        check_gpus_never_overcommitted(sbs_run, run)
        check_latencies_come_from_submissions_and_starts(sbs_run, run)
        check_the_drained_node_emptied_and_took_nothing_new(sbs_run, run)
