"""Benchmark: machine instructions per decide() at Ai2 scale, counted by valgrind's callgrind (issue 2).

Run: .venv/bin/python -m benchmarks.bench_decide_instructions [--runs N] [--pending N]
With the compiled core: PYTHONPATH=build/compiled-core:. .venv/bin/python -m benchmarks.bench_decide_instructions

Wall-clock time on these shared machines swings by a quarter between runs of the same code (README), so an A/B of
a change to the core cannot be read from milliseconds alone. Callgrind counts the instructions executed inside
AllotmentPolicy.decide and nothing else (collection is switched on only inside that function): the count repeats
to within a few thousandths for the same build and input, whatever else the machine is doing. It says nothing about
cache misses or branch mispredictions, so a speed claim still needs interleaved timings (bench_decide); the count
tells whether a change removed work.

Needs valgrind (`callgrind`) on PATH. The cyclic garbage collector is off while decide() runs, as in the engine.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.core_build import core_build

_CHILD = """
import gc, sys
from allotment.core.cycle import AllotmentPolicy
from benchmarks.snapshots import ai2_snapshot
snap, now = ai2_snapshot(pending=int(sys.argv[1]))
policy = AllotmentPolicy()
gc.collect()
gc.disable()
for _ in range(int(sys.argv[2])):
    policy.decide(snap, now)
"""

_PURE = "decide"
_COMPILED = "CPyDef_cycle___AllotmentPolicy___decide"


def count(runs: int, pending: int) -> int:
    """Instructions executed inside decide() over `runs` calls on one Ai2-scale snapshot."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    compiled = core_build() != "core: pure Python"
    # the pure core's decide is interpreted: callgrind sees only the interpreter's C functions, so it counts the
    # whole child process, less the same process with no decide() call
    with tempfile.TemporaryDirectory() as tmp:
        total = _callgrind(Path(tmp) / "with.out", runs, pending, compiled)
        if compiled:
            return total
        return total - _callgrind(Path(tmp) / "without.out", 0, pending, compiled)


def _callgrind(out: Path, runs: int, pending: int, compiled: bool) -> int:
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if compiled:
        cmd += ["--collect-atstart=no", f"--toggle-collect={_COMPILED}"]
    cmd += [sys.executable, "-c", _CHILD, str(pending), str(runs)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--pending", type=int, default=10_000)
    args = ap.parse_args()
    total = count(args.runs, args.pending)
    print(
        f"decide() at Ai2 scale ({args.pending:,} pending; {core_build()}): "
        f"{total / args.runs / 1e6:.1f} M instructions per call (callgrind, {args.runs} calls)"
    )


if __name__ == "__main__":
    main()
