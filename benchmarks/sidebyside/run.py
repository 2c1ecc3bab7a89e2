"""Running the side-by-side comparison: both replays, one after the other, on one cluster, and the report.

Owns: the order (Slurm deciding first, then Allotment deciding, on the same cluster with the same workload), the
account setup before them, the working directory layout (`<workdir>/slurm/…`, `<workdir>/allotment/…`, each with
run.json and the merged events.jsonl; `report.json` and `report.md`) and the command line.
Must not: start or configure the Slurm cluster (scripts/slurm-cluster start --mode accounting does) or decide
anything.

Reproduce (as root; the full run took 8 minutes on a shared 2-core machine, the --quick one about 2.5):
    ALLOT_SLURM_DIR=/tmp/allot-slurm-sbs ALLOT_SLURM_PORT=17200 scripts/slurm-cluster start --mode accounting
    .venv/bin/python -m benchmarks.sidebyside --conf /tmp/allot-slurm-sbs/etc/slurm.conf --out sidebyside.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from allotment.executors.slurm import SlurmCli
from benchmarks.sidebyside.metrics import RunMetrics, compute, table
from benchmarks.sidebyside.replay import replay
from benchmarks.sidebyside.slurm_direct import SlurmDirect, setup_accounts
from benchmarks.sidebyside.through_allotment import ThroughAllotment
from benchmarks.sidebyside.workload import (
    CONFIG,
    DRAIN_AT,
    DRAIN_NODE,
    FULL,
    QUICK,
    Scale,
    accounts,
    entitled,
    generate,
)


@dataclass(frozen=True, slots=True)
class Result:
    runs: list[RunMetrics]
    markdown: str
    workdir: Path


def wait_idle(cli: SlurmCli, timeout: float = 60.0) -> None:
    """Wait until Slurm runs no job (the previous replay's last jobs have left)."""
    deadline = time.monotonic() + timeout
    while cli.run(["squeue", "-h", "-o", "%i"], check=False).strip() and time.monotonic() < deadline:
        time.sleep(0.5)


def run_both(conf: str, scale: Scale, workdir: Path, timeout: float, seed: int = 7, config: Path = CONFIG) -> Result:
    cli = SlurmCli(conf=conf)
    os.environ["SLURM_CONF"] = conf
    tree = accounts(config)
    shares = entitled(tree)
    plans = generate(scale, seed)
    setup_accounts(cli, tree, scale)
    wait_idle(cli)
    replay(SlurmDirect(cli, scale), plans, scale, workdir / "slurm", cli, timeout)
    wait_idle(cli)
    replay(ThroughAllotment(conf, workdir / "allotment-data", scale, config), plans, scale, workdir / "allotment",
           cli, timeout)  # fmt: skip
    runs = [compute(workdir / name, plans, shares) for name in ("slurm", "allotment")]
    version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    intro = (
        f"{len(plans)} jobs, {scale.span:g} lab hours of arrivals, 8 nodes × 8 GPUs ({version}); "
        f"node {DRAIN_NODE} drained at {100 * DRAIN_AT:.0f} % of the span.\n\n"
    )
    markdown = intro + table(runs, scale.hour)
    (workdir / "report.json").write_text(json.dumps([m.to_json() for m in runs], indent=1))
    (workdir / "report.md").write_text(markdown)
    return Result(runs, markdown, workdir)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conf", default=os.environ.get("SLURM_CONF", "/tmp/allot-slurm-sbs/etc/slurm.conf"))
    ap.add_argument("--quick", action="store_true", help="the 2-minute version the tests run")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("sidebyside.md"), help="where the Markdown table goes")
    ap.add_argument("--keep", type=Path, default=None, help="keep the job records in this directory")
    args = ap.parse_args()
    scale = QUICK if args.quick else FULL
    started = time.monotonic()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="allot-sidebyside-"))
    try:
        result = run_both(args.conf, scale, workdir, timeout=8 * scale.span_seconds, seed=args.seed)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    args.out.write_text(result.markdown)
    print(result.markdown)
    print(f"written to {args.out}; {time.monotonic() - started:.0f} s in all")
