"""Slurm deciding: the workload submitted straight to Slurm with accounts and QOS, the way a lab runs it.

Owns: mirroring the budget tree as Slurm accounts (`sacctmgr add account … parent=… fairshare=<allocation>`, the
submitting user `root` in every leaf; usage reset to zero so both runs start even), scaling the opportunistic
QOS's PreemptExemptTime and GraceTime to the run's lab hour, and the `SlurmDirect` runner: one `sbatch` per job
with `--account`, `--qos` (normal, opportunistic or interactive), the gang's node count, GPUs per node, a time limit
(backfill needs one) and `--requeue`; the script runs the worker under `srun` with `--self-requeue`.
Must not: pin nodes, hold jobs or preempt anything itself: Slurm's multifactor priority (Fair Tree), backfill and
QOS preemption decide. The cluster's settings live in scripts/slurm-cluster (accounting mode).
"""

from __future__ import annotations

import math
from pathlib import Path

from allotment.executors.slurm import SlurmCli
from benchmarks.sidebyside.replay import worker_argv
from benchmarks.sidebyside.workload import Account, JobPlan, Kind, Scale

QOS = {Kind.BATCH: "normal", Kind.OPPORTUNISTIC: "opportunistic", Kind.SESSION: "interactive"}
GRACE = 10
"""GraceTime of the opportunistic QOS, seconds (Allotment gives opportunistic jobs the same grace)."""


def hms(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def exempt_seconds(scale: Scale) -> float:
    """PreemptExemptTime of opportunistic jobs: half a lab hour of guaranteed progress before a preemption."""
    return scale.hour / 2


def setup_accounts(cli: SlurmCli, tree: list[Account], scale: Scale) -> None:
    """Create (or update) the account tree with Fair Tree shares, zero its usage and scale the QOS timings."""
    have = set(cli.run(["sacctmgr", "-n", "-P", "show", "account", "format=account"]).split())
    leaves = {a.name for a in tree} - {a.parent for a in tree if a.parent}
    for a in tree:
        name = a.name.lower()
        parent = (a.parent or "root").lower()
        if name in have:
            cli.run(["sacctmgr", "-i", "modify", "account", name, "set", f"fairshare={a.shares}"], check=False)
        else:
            cli.run(["sacctmgr", "-i", "add", "account", name, f"parent={parent}", f"fairshare={a.shares}"])
    cli.run(["sacctmgr", "-i", "add", "user", "root", f"account={','.join(sorted(leaves))}"], check=False)
    for name in sorted(leaves):
        cli.run(
            ["sacctmgr", "-i", "modify", "user", "root", "where", f"account={name}", "set", "RawUsage=0"], check=False
        )
    cli.run(
        [
            "sacctmgr", "-i", "modify", "qos", "opportunistic", "set",
            f"PreemptExemptTime={hms(exempt_seconds(scale))}", f"GraceTime={GRACE}",
        ]
    )  # fmt: skip


def time_limit_minutes(plan: JobPlan) -> int:
    """A generous limit, as users give: the work plus a minute, in whole minutes (Slurm's unit)."""
    return math.ceil(plan.work / 60) + 1


class SlurmDirect:
    """Submits every job straight to Slurm; Slurm decides everything."""

    label = "Slurm deciding"

    def __init__(self, cli: SlurmCli, scale: Scale) -> None:
        self.cli, self.scale = cli, scale

    def submit(self, plan: JobPlan, jobdir: Path) -> None:
        argv = worker_argv(plan, jobdir, self.scale, self_requeue=plan.kind is not Kind.SESSION)
        script = jobdir / "job.sh"
        script.write_text("#!/bin/bash\nexec srun --ntasks-per-node=1 " + " ".join(argv) + "\n")
        script.chmod(0o700)
        args = [
            f"--account={plan.account.lower()}",
            f"--qos={QOS[plan.kind]}",
            f"--nodes={plan.nodes}",
            "--ntasks-per-node=1",
            f"--gres=gpu:{plan.gpus}",
            f"--time={time_limit_minutes(plan)}",
            f"--job-name=sbs.{plan.name}",
            f"--output={jobdir / 'slurm.out'}",
            "--open-mode=append",
            "--requeue" if plan.kind is not Kind.SESSION else "--no-requeue",
        ]
        self.cli.sbatch(args, str(script))

    def tick(self) -> None:
        return None

    def overhead(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        return None
