"""Benchmark: jobs started per second through Allotment on Slurm versus Slurm starting the same pinned jobs itself
(issue 4), in one run on the local test cluster.

Three phases, each starting --jobs pinned 1-GPU jobs (default: one per GPU of the cluster, so all fit at once) whose
single srun task writes the time as its first action and then sleeps; a job counts as started when that line is
written. Makespan = last start − the phase's first command; rate = jobs / makespan.

1. Allotment: the real engine (allotment.engine.setup.build, executor "slurm", examples/slurm-local on a temporary
   SQLite data directory) decides and launches every job (sbatch --hold, scontrol update NodeList=…, scontrol
   release), cycling every 50 ms; the clock starts just before the first cycle after the submissions.
2. Slurm direct: `sbatch --nodelist=<node>` per job, each job pinned to the node the engine chose for it in phase
   1 (the same jobs on the same nodes: one command per job, Slurm's own path).
3. Held + pin + release without the engine: `sbatch --hold`, `scontrol update NodeList=`, `scontrol release` per
   job, from a plain loop, on the same nodes.

Prints each phase's makespan and rate and the ratio Allotment / direct (target ≥ 0.8). Between phases every job is
cancelled and the cluster drained of them.

Reproduce: scripts/slurm-cluster start && .venv/bin/python -m benchmarks.bench_slurm [--jobs N] [--conf PATH]
(as root; about a minute for 64 jobs on the 8-node cluster).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

from allotment.engine.fleet_sync import SyncedExecutor
from allotment.engine.setup import Settings, build
from allotment.executors.slurm import SlurmCli, SlurmExecutor
from allotment.store.db import reading
from allotment.store.jobs import Submission, request_cancel, submit
from allotment.store.tables import RunRow

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "slurm-local" / "allotment.yaml"
WORK = 'date +%s.%N > "$1"; exec sleep 120'


def _markers_time(paths: list[Path], timeout: float = 120.0, tick: Callable[[], object] | None = None) -> float:
    """Wait until every marker holds a time; return the latest one."""
    deadline = time.monotonic() + timeout
    while True:
        if tick is not None:
            tick()
        texts = [p.read_text().strip() if p.exists() else "" for p in paths]
        if all(texts):
            return max(float(t) for t in texts)
        if time.monotonic() > deadline:
            raise SystemExit(f"only {sum(bool(t) for t in texts)} of {len(paths)} jobs started within {timeout:.0f}s")
        time.sleep(0.05)


def _drain(cli: SlurmCli, prefix: str) -> None:
    """Cancel every job whose name starts with `prefix` and wait until none runs."""
    names = cli.run(["squeue", "-h", "-o", "%i %j"], check=False).split("\n")
    ids = [line.split()[0] for line in names if line.split()[1:2] and line.split()[1].startswith(prefix)]
    if ids:
        cli.run(["scancel", *ids], check=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = cli.run(["squeue", "-h", "-o", "%j %T"], check=False).split("\n")
        if not [s for s in states if s.startswith(prefix)]:
            return
        time.sleep(0.2)


def through_allotment(conf: str, tmp: Path, jobs: int) -> tuple[float, list[str]]:
    """The makespan of starts through the engine, and the node the engine chose for each job."""
    built = build(Settings(config=CONFIG, data_dir=tmp / "data", executor="slurm", slurm_conf=Path(conf)))
    built.engine.reconcile()
    built.engine.step()  # discovers the fleet from Slurm
    markers = [tmp / "allot" / f"{i}" for i in range(jobs)]
    markers[0].parent.mkdir()
    ids = []
    with built.sessions.begin() as s:
        for i, marker in enumerate(markers):
            sub = Submission(
                budget="physics" if i % 2 else "biology",
                user="ben" if i % 2 else "chen",
                command=["sh", "-c", WORK, "sh", str(marker)],
                gpus=1,
                grace=1,
            )
            ids.append(submit(s, sub, built.engine.clock.now())[0].id)
    t0 = time.time()
    last = _markers_time(markers, tick=built.engine.step)
    with reading(built.sessions) as s:
        placed: dict[str, Any] = {
            row.job_id: row.placement for row in s.execute(select(RunRow.job_id, RunRow.placement))
        }
    nodes = [placed[job_id][0]["node"] for job_id in ids]
    with built.sessions.begin() as s:
        for job_id in ids:
            request_cancel(s, job_id, built.engine.clock.now())
    for _ in range(20):
        built.engine.step()
        if not built.engine.executor.alive():
            break
        time.sleep(0.2)
    ex = built.engine.executor
    assert isinstance(ex, SyncedExecutor) and isinstance(ex.inner, SlurmExecutor)
    _drain(ex.inner.cli, "allot.")
    ex.inner.close()
    return last - t0, nodes


def _script(tmp: Path, marker: Path) -> Path:
    path = tmp / f"{marker.name}.sh"
    path.write_text(f"#!/bin/bash\nexec srun --ntasks-per-node=1 sh -c '{WORK}' sh {marker}\n")
    path.chmod(0o700)
    return path


def direct(cli: SlurmCli, tmp: Path, nodes: list[str], held: bool) -> float:
    """The makespan of starts of one job pinned to each of `nodes`, submitted by a plain loop."""
    jobs = len(nodes)
    name = "bench-held" if held else "bench-direct"
    markers = [tmp / name / f"{i}" for i in range(jobs)]
    markers[0].parent.mkdir()
    scripts = [_script(markers[0].parent, m) for m in markers]
    common = ["--parsable", "-N1", "--ntasks-per-node=1", "--gres=gpu:1", "-o", "/dev/null", "-J", name]
    t0 = time.time()
    for i, script in enumerate(scripts):
        node = nodes[i]
        if held:
            job = cli.run(["sbatch", *common, "--hold", str(script)]).strip().split(";")[0]
            cli.run(["scontrol", "update", f"JobId={job}", f"NodeList={node}"])
            cli.run(["scontrol", "release", job])
        else:
            cli.run(["sbatch", *common, f"--nodelist={node}", str(script)])
    last = _markers_time(markers)
    _drain(cli, name)
    return last - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--conf", default=os.environ.get("SLURM_CONF", "/tmp/allot-slurm/etc/slurm.conf"))
    ap.add_argument("--jobs", type=int, default=0, help="default: one per GPU of the cluster")
    args = ap.parse_args()
    cli = SlurmCli(conf=args.conf)
    nodes = sorted(n["name"] for n in cli.nodes())
    jobs = args.jobs or 8 * len(nodes)
    os.environ["SLURM_CONF"] = args.conf
    with tempfile.TemporaryDirectory(prefix="allot-bench-slurm-") as d:
        tmp = Path(d)
        allot, placed = through_allotment(args.conf, tmp, jobs)
        plain = direct(cli, tmp, placed, held=False)  # the same jobs on the same nodes
        held = direct(cli, tmp, placed, held=True)
    version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"{jobs} pinned 1-GPU jobs on {len(nodes)} nodes ({version}); makespan of starts, jobs started per second")
    for label, seconds in (
        ("Allotment engine → Slurm executor", allot),
        ("Slurm direct (sbatch --nodelist)", plain),
        ("held + pin + release, no engine", held),
    ):
        print(f"  {label:36s} {seconds:6.2f} s  {jobs / seconds:6.1f} jobs/s")
    print(
        f"  ratio Allotment / Slurm direct: {plain / allot:.2f} (target ≥ 0.8); / held+pin+release: {held / allot:.2f}"
    )


if __name__ == "__main__":
    main()
