"""Benchmark: decide() at Ai2 scale and at 10× (issue 2). Prints median and p95 time and peak memory.

Run: .venv/bin/python -m benchmarks.bench_decide [--repeat N] [--scale K ...]

Ai2 scale: the example organisation (≈4,096 GPUs in 512 nodes, ~60 budgets in 3 levels) with the demo's sample
workload: a busy fleet (~600 running jobs holding ~88 % of the GPUs) and 10,000 pending jobs (mostly 1–8 GPUs, a few
64–512-GPU gangs, sessions, opportunistic jobs). 10×: ten copies side by side under one root (40,960 GPUs,
~6,000 running and 100,000 pending jobs, ~690 budgets). Targets: median ≤ 50 ms at Ai2 scale, ≤ 1 s at 10×,
peak memory ≤ 1 GiB at 10×.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc

from allotment.core.cycle import AllotmentPolicy
from benchmarks.snapshots import ai2_snapshot, describe, scaled


def measure(scale: int, repeat: int, pending: int) -> dict[str, float]:
    base, now = ai2_snapshot(pending=pending)
    snap = scaled(base, scale)
    policy = AllotmentPolicy()
    policy.decide(snap, now)  # warm-up
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        d = policy.decide(snap, now)
        times.append(time.perf_counter() - t0)
    gc.collect()
    tracemalloc.start()
    policy.decide(snap, now)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    print(f"scale {scale}×: {describe(snap)}")
    print(
        f"  decide(): median {statistics.median(times) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms over {repeat} runs; "
        f"peak memory of one decide {peak / 2**20:.0f} MiB; "
        f"{len(d.starts)} starts, {len(d.preempts)} preemptions, {len(d.reserves)} reservations, "
        f"{len(d.pending):,} reasons"
    )
    return {"median": statistics.median(times), "p95": p95, "peak": peak}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--scale", type=int, nargs="*", default=[1, 10])
    ap.add_argument("--pending", type=int, default=10_000)
    args = ap.parse_args()
    for k in args.scale:
        measure(k, args.repeat if k == 1 else max(3, args.repeat // 4), args.pending)


if __name__ == "__main__":
    main()
