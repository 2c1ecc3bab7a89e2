"""Benchmark: the local executor through the real engine (issue 4). Prints median and p95 of

- decision → running: from the start of the engine cycle that starts a job to the job's own first action (it
  writes its pid and the time as its first command);
- preemption → gone: from the start of the cycle that tells a running job to leave (a cancellation: the cycle
  records the terminate intent and delivers SIGTERM to the job's process group, the same path as a preemption)
  to the moment its process no longer exists (it is gone or a zombie, sampled every millisecond).

One job at a time (1 GPU, `sh` writing its marker then `exec sleep`), over --jobs jobs (default 50), on
examples/small with the local executor on a temporary data directory (SQLite).

Run: .venv/bin/python -m benchmarks.bench_local [--jobs N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from allotment.engine.setup import Built, Settings, build
from allotment.store.jobs import Submission, request_cancel, submit

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
JOB = 'echo "$$ $(date +%s.%N)" > "$1"; exec sleep 600'


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _step_until_started(built: Built, job_id: str) -> float:
    """Cycle until a cycle starts `job_id`; returns the wall time at which that cycle began."""
    while True:
        t0 = time.time()
        report = built.engine.step()
        if any(s.job_id == job_id for s in report.decisions.starts):
            return t0
        time.sleep(0.01)


def one(built: Built, tmp: Path, i: int) -> tuple[float, float, float]:
    marker = tmp / f"marker-{i}"
    with built.sessions.begin() as s:
        job, _ = submit(
            s,
            Submission(budget="pretrain", user="ben", command=["sh", "-c", JOB, "sh", str(marker)], gpus=1, grace=5),
            built.engine.clock.now(),
        )
        job_id = job.id
    decided = _step_until_started(built, job_id)
    step_done = time.time()
    while not (marker.exists() and marker.read_text().strip()):
        time.sleep(0.001)
    pid_text, started = marker.read_text().split()
    pid = int(pid_text)
    with built.sessions.begin() as s:
        request_cancel(s, job_id, built.engine.clock.now())
    t0 = time.time()
    built.engine.step()
    while not _gone(pid):
        time.sleep(0.001)
    gone = time.time()
    while built.engine.executor.alive():
        built.engine.step()
        time.sleep(0.01)
    built.engine.step()
    return float(started) - decided, gone - t0, step_done - decided


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="allot-bench-local-") as d:
        tmp = Path(d)
        built = build(Settings(config=SMALL, data_dir=tmp / "data", executor="local"))
        one(built, tmp, -1)  # warm-up (imports, first database writes)
        results = [one(built, tmp, i) for i in range(args.jobs)]
    start = [r[0] for r in results]
    stop = [r[1] for r in results]
    cycle = [r[2] for r in results]
    print(f"local executor through the engine, {args.jobs} jobs, one at a time (examples/small, SQLite)")
    for name, values in (
        ("decision → running (cycle start → job's first line)", start),
        ("  of which: the starting cycle (decide, commit, launch)", cycle),
        ("preemption → process gone (cycle start → process ended)", stop),
    ):
        print(
            f"  {name}: median {statistics.median(values) * 1000:.0f} ms, p95 {pct(values, 0.95) * 1000:.0f} ms, "
            f"max {max(values) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
