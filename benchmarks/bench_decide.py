"""Benchmark: decide() at Ai2 scale and at 10× (issue 2). Prints median and p95 time and peak memory.

Run: .venv/bin/python -m benchmarks.bench_decide [--repeat N] [--scale K ...] [--steps]

With --steps it also prints the median time of each step of the cycle (cycle.py's steps, the CycleState set-up and
the explanation of waiting jobs), measured by wrapping the functions decide() calls (pure-Python core only: a
compiled core, scripts/build-compiled-core, calls its functions directly).

Each repeat times decide() twice: with Python's cyclic garbage collector paused, as the engine runs it
(engine/collector.py), and with it running.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from allotment.core import cycle
from allotment.core.cycle import AllotmentPolicy
from allotment.engine.collector import collector_paused
from benchmarks.core_build import core_build
from benchmarks.snapshots import ai2_snapshot, describe, scaled

STEPS = (
    "CycleState",
    "_standings",
    "end_of_life",
    "install_carried",
    "slice_ends",
    "drains",
    "reserved_first",
    "sessions_first",
    "window_claims",
    "fair_share_order",
    "headroom_refill",
    "Explainer",
    "drain_estimates",
)
"""Names decide() looks up in allotment.core.cycle when it runs; "Explainer" covers explaining every waiting job."""


class _Timed:
    """A stand-in for one of cycle's names that adds the time spent in it (and in what it returns, for Explainer)."""

    def __init__(self, name: str, fn: Callable[..., Any], totals: dict[str, float]) -> None:
        self.name, self.fn, self.totals = name, fn, totals

    def __call__(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        out = self.fn(*args)
        self.totals[self.name] = self.totals.get(self.name, 0.0) + time.perf_counter() - t0
        if self.name == "Explainer":
            out = _TimedExplainer(out, self.totals)
        return out


class _TimedExplainer:
    def __init__(self, explainer: Any, totals: dict[str, float]) -> None:
        self.explainer, self.totals = explainer, totals

    def explain(self, job: Any) -> Any:
        t0 = time.perf_counter()
        out = self.explainer.explain(job)
        self.totals["Explainer"] += time.perf_counter() - t0
        return out


@contextmanager
def _steps_timed(totals: dict[str, float]) -> Iterator[None]:
    originals = {name: getattr(cycle, name) for name in STEPS}
    try:
        for name, fn in originals.items():
            setattr(cycle, name, _Timed(name, fn, totals))
        yield
    finally:
        for name, fn in originals.items():
            setattr(cycle, name, fn)


def step_times(snap: Any, now: int, repeat: int) -> dict[str, float]:
    """Median seconds of each step over `repeat` timed decide() calls."""
    runs: list[dict[str, float]] = []
    policy = AllotmentPolicy()
    for _ in range(repeat):
        totals: dict[str, float] = {}
        with _steps_timed(totals):
            gc.collect()
            policy.decide(snap, now)
        runs.append(totals)
    return {name: statistics.median(r.get(name, 0.0) for r in runs) for name in STEPS}


def measure(scale: int, repeat: int, pending: int, steps: bool = False) -> dict[str, float]:
    base, now = ai2_snapshot(pending=pending)
    snap = scaled(base, scale)
    policy = AllotmentPolicy()
    policy.decide(snap, now)  # warm-up
    times, collecting = [], []
    for _ in range(repeat):  # no gc.collect() in between: the collector's state carries over, as in a server
        t0 = time.perf_counter()
        with collector_paused():  # as the engine runs it (Engine.step)
            d = policy.decide(snap, now)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        policy.decide(snap, now)
        collecting.append(time.perf_counter() - t0)
    gc.collect()
    tracemalloc.start()
    policy.decide(snap, now)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    p95, p95_collecting = _p95(times), _p95(collecting)
    print(f"scale {scale}×: {describe(snap)} ({core_build()})")
    print(
        f"  decide(): median {statistics.median(times) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms over {repeat} runs "
        f"with the cyclic collector paused, as the engine runs it (running: median "
        f"{statistics.median(collecting) * 1000:.1f} ms, p95 {p95_collecting * 1000:.1f} ms); "
        f"peak memory of one decide {peak / 2**20:.0f} MiB; "
        f"{len(d.starts)} starts, {len(d.preempts)} preemptions, {len(d.reserves)} reservations, "
        f"{len(d.pending):,} reasons"
    )
    if steps and core_build() == "core: pure Python":  # compiled modules call each other directly: no wrapping
        per_step = step_times(snap, now, repeat)
        print("  per step (median ms): " + ", ".join(f"{k} {v * 1000:.1f}" for k, v in per_step.items()))
    return {"median": statistics.median(times), "p95": p95, "peak": peak}


def _p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--scale", type=int, nargs="*", default=[1, 10])
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--steps", action="store_true", help="also time each step of the cycle")
    args = ap.parse_args()
    for k in args.scale:
        measure(k, args.repeat if k == 1 else max(3, args.repeat // 4), args.pending, args.steps)


if __name__ == "__main__":
    main()
