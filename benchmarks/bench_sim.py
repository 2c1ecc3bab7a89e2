"""Benchmark: the simulator on the ITP 2021 trace through the full Allotment policy (issue 6).

Run: .venv/bin/python -m benchmarks.bench_sim [--days D] [--resolution S] [--store memory|sqlite]
     [--sizing contended|original]

Replays the first D days (default: all 60) of data/traces/itp-2021 on the contended fleet (the median of the trace's
unconstrained demand) through the real engine cycle and the in-memory store (`--store sqlite`: the SQL store on SQLite
in memory), and prints simulated days, jobs, cycles, events (arrivals plus executor reports), wall seconds, events per
second, the share of wall time spent in decide(), and the peak resident memory. Target: all 69,351 jobs in ≤ 60 s on
one core with peak memory ≤ 2 GiB.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from allotment.core.cycle import AllotmentPolicy
from allotment.sim.runner import SimOptions, Simulation
from allotment.sim.traces import Replay, Sizing, trace_workload
from benchmarks.core_build import core_build

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--days", type=float, default=None, help="replay only the first D days (default: all)")
    parser.add_argument("--resolution", type=int, default=1, help="events within this many seconds share a cycle")
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory", help="where state is kept")
    parser.add_argument("--sizing", choices=[s.value for s in Sizing], default=Sizing.CONTENDED.value)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        workload = trace_workload(
            "itp",
            ROOT / "data" / "traces" / "itp-2021",
            Path(tmp),
            Replay(sizing=Sizing(args.sizing), days=args.days, drain_days=0),
        )
        load = time.perf_counter() - t0
        options = SimOptions(resolution=args.resolution, idle_gap=3600, store=args.store)
        sim = Simulation(workload, AllotmentPolicy(), options)
        cpu0 = time.process_time()
        result = sim.run()
        cpu = time.process_time() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall = result.wall_seconds
    print(
        f"trace: itp-2021, {len(workload.jobs)} jobs, {result.duration / 86400:.1f} simulated days, "
        f"fleet {result.fleet_gpus} GPUs ({args.sizing}), resolution {args.resolution} s, store {args.store}; "
        f"import {load:.1f} s"
    )
    print(
        f"cycles: {result.cycles}; events: {result.events}; wall: {wall:.1f} s "
        f"({1000 * wall / max(result.cycles, 1):.1f} ms per cycle, decide {100 * result.decide_seconds / wall:.0f} %)"
    )
    print(f"CPU time: {cpu:.1f} s (the wall time includes waiting for a shared CPU); {core_build()}")
    print(
        f"events per second: {result.events / wall:,.0f} (wall), {result.events / max(cpu, 1e-9):,.0f} (CPU); "
        f"peak resident memory: {peak:,.0f} MiB"
    )
    print("target: 69,351 jobs in ≤ 60 s, ≤ 2 GiB")


if __name__ == "__main__":
    main()
