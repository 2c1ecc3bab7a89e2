"""The side-by-side metrics from hand-written job records (no Slurm): segments, preemptions with and without notice,
work lost, shares and percentiles, in named table cases built with a small fluent builder.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from benchmarks.sidebyside.metrics import compute, percentile
from benchmarks.sidebyside.workload import JobPlan, Kind

T0 = 1000.0


@dataclass
class JobRecords:
    """A fluent builder of one job's events.jsonl, as worker.py writes it."""

    plan: JobPlan
    lines: list[dict[str, Any]] = field(default_factory=list)

    def start(self, t: float, saved: float = 0.0, beat: tuple[float, float] | None = None) -> JobRecords:
        prev = {"t": T0 + beat[0], "done": beat[1], "saved": saved} if beat else None
        self.lines.append({"ev": "start", "t": T0 + t, "saved": saved, "nodes": "gpu01", "prev_beat": prev})
        return self

    def term(self, t: float, done: float) -> JobRecords:
        self.lines.append({"ev": "term", "t": T0 + t, "done": done})
        return self

    def done(self, t: float) -> JobRecords:
        self.lines.append({"ev": "done", "t": T0 + t})
        return self


def job(name: str, kind: Kind = Kind.BATCH, gpus: int = 8, account: str = "pretrain") -> JobRecords:
    return JobRecords(JobPlan(name, 0.0, account, kind, 1, gpus, 100.0))


def write_run(root: Path, jobs: list[JobRecords], span: float = 100.0) -> Path:
    for j in jobs:
        (root / j.plan.name).mkdir()
        (root / j.plan.name / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in j.lines))
    run = {
        "label": "test",
        "t0": T0,
        "span": span,
        "submitted": {j.plan.name: T0 for j in jobs},
        "drain_at": T0 + 10,
        "empty_at": T0 + 25,
        "slurmctld_cpu": 1.5,
        "overhead": {},
        "timed_out": False,
    }
    (root / "run.json").write_text(json.dumps(run))
    return root


ENTITLED = {"pretrain": 0.5, "vision": 0.5}

CASES = {
    "uninterrupted": ([job("a").start(0).done(100)], {"preemptions": 0, "killed": 0, "lost": 0.0, "completed": 1}),
    "preempted with notice, checkpointed": (
        [job("a").start(0).term(40, 40).start(50, saved=40).done(110)],
        {"preemptions": 1, "killed": 0, "lost": 0.0, "completed": 1},
    ),
    "killed without notice loses work since the checkpoint": (
        [job("a").start(0).start(60, saved=30, beat=(55, 55)).done(130)],
        {"preemptions": 1, "killed": 1, "lost": 25.0 * 8, "completed": 1},
    ),
    "killed before its first beat: the beat found is the earlier segment's": (
        [job("a").start(0).term(40, 40).start(50, saved=40).start(52, saved=40, beat=(39, 39)).done(120)],
        {"preemptions": 2, "killed": 1, "lost": 0.0, "completed": 1},
    ),
    "never finished": ([job("a").start(0)], {"preemptions": 0, "killed": 0, "lost": 0.0, "completed": 0}),
}


@pytest.mark.parametrize("name", CASES)
def test_segments_preemptions_and_work_lost(tmp_path: Path, name: str) -> None:
    jobs, want = CASES[name]
    m = compute(write_run(tmp_path, jobs), [j.plan for j in jobs], ENTITLED)
    assert (m.preemptions, m.killed, m.work_lost_gpu_s, m.completed) == (
        want["preemptions"],
        want["killed"],
        want["lost"],
        want["completed"],
    )


def test_shares_count_only_the_arrival_span(tmp_path: Path) -> None:
    jobs = [job("a").start(0).done(150), job("b", account="vision").start(50).done(100)]
    m = compute(write_run(tmp_path, jobs, span=100.0), [j.plan for j in jobs], ENTITLED)
    assert m.received == {"pretrain": pytest.approx(100 / 150), "vision": pytest.approx(50 / 150)}
    assert m.utilisation == pytest.approx((100 * 8 + 50 * 8) / (64 * 100))
    assert m.drain_to_empty == 15
    assert m.makespan == 150


def test_session_latency_and_gang_wait(tmp_path: Path) -> None:
    jobs = [job("s1", Kind.SESSION, 1).start(2).done(20), job("s2", Kind.SESSION, 1).start(8).done(20)]
    m = compute(write_run(tmp_path, jobs), [j.plan for j in jobs], ENTITLED)
    assert (m.session_p50, m.session_p95) == (2, 8)
    assert m.large_gang_wait == []


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [([1.0, 2.0, 3.0, 4.0], 50, 2.0), ([1.0, 2.0, 3.0, 4.0], 95, 4.0), ([7.0], 50, 7.0)],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, want: float) -> None:
    assert percentile(values, q) == want


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 50))
