"""Replaying the side-by-side workload against the Slurm cluster: the part both runs share.

Owns: the wall-clock loop of one replay — submit each job at its arrival offset through a `Runner` (Slurm deciding
or Allotment deciding), give the runner its ticks, drain the chosen node mid-run in Slurm (`scontrol update
State=DRAIN`: the same operator action in both runs; Allotment hears it through its fleet sync), watch until
Slurm reports the node DRAINED (empty) and resume it, and wait until every job reported `done` — and the record of
it (`RunRecord`: submission times, drain and empty times, slurmctld's CPU time, the runner's own overhead).
Must not: decide where or when a job runs (the runner's scheduler does), or compute metrics (metrics.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from allotment.executors.slurm import SlurmCli
from benchmarks.sidebyside.workload import DRAIN_NODE, JobPlan, Scale

WORKER = Path(__file__).resolve().parent / "worker.py"
TICK = 0.25


def worker_argv(plan: JobPlan, jobdir: Path, scale: Scale, self_requeue: bool) -> list[str]:
    """The job's command: the checkpointing sleep (worker.py), checkpointing every half lab hour."""
    argv = [sys.executable, str(WORKER), str(jobdir), f"{plan.work:g}", "--every", f"{max(1.0, scale.hour / 2):g}"]
    return [*argv, "--self-requeue"] if self_requeue else argv


class Runner(Protocol):
    """One way of deciding: submits jobs and gets a tick every TICK seconds."""

    label: str

    def submit(self, plan: JobPlan, jobdir: Path) -> None: ...

    def tick(self) -> None: ...

    def overhead(self) -> dict[str, float]:
        """The decider's own cost beyond slurmctld (seconds), by name."""
        ...

    def close(self) -> None: ...


@dataclass
class RunRecord:
    label: str
    t0: float
    span: float
    submitted: dict[str, float] = field(default_factory=dict)
    drain_at: float | None = None
    empty_at: float | None = None
    ended_at: float | None = None
    slurmctld_cpu: float = 0.0
    overhead: dict[str, float] = field(default_factory=dict)
    timed_out: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "t0": self.t0,
            "span": self.span,
            "submitted": self.submitted,
            "drain_at": self.drain_at,
            "empty_at": self.empty_at,
            "ended_at": self.ended_at,
            "slurmctld_cpu": self.slurmctld_cpu,
            "overhead": self.overhead,
            "timed_out": self.timed_out,
        }


def process_cpu(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def slurmctld_pid(conf: str) -> int:
    pid_file = Path(conf).parents[1] / "run" / "slurmctld.pid"
    return int(pid_file.read_text().strip())


def finished(jobdir: Path) -> bool:
    events = jobdir / "events.jsonl"
    return events.exists() and '"ev": "done"' in events.read_text()


def node_state(cli: SlurmCli, node: str) -> str:
    return cli.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], check=False).strip().lower()


def replay(
    runner: Runner, plans: list[JobPlan], scale: Scale, rundir: Path, cli: SlurmCli, timeout: float
) -> RunRecord:
    """Run one replay to the end (every job done) or until `timeout` wall seconds; returns its record."""
    rundir.mkdir(parents=True, exist_ok=True)
    ctld = slurmctld_pid(cli.conf or os.environ["SLURM_CONF"])
    cpu0 = process_cpu(ctld)
    t0 = time.time()
    rec = RunRecord(runner.label, t0, scale.span_seconds)
    pending = list(plans)
    open_jobs = {p.name: rundir / p.name for p in plans}
    drained = False
    try:
        while open_jobs:
            now = time.time()
            if now - t0 > timeout:
                rec.timed_out = True
                break
            while pending and pending[0].at <= now - t0:
                plan = pending.pop(0)
                jobdir = rundir / plan.name
                jobdir.mkdir()
                rec.submitted[plan.name] = time.time()
                runner.submit(plan, jobdir)
            if not drained and now - t0 >= scale.drain_at:
                rec.drain_at = time.time()
                cli.scontrol("update", f"NodeName={DRAIN_NODE}", "State=DRAIN", "Reason=side-by-side drain")
                drained = True
            elif drained and rec.empty_at is None and node_state(cli, DRAIN_NODE).startswith("drained"):
                rec.empty_at = time.time()
                cli.scontrol("update", f"NodeName={DRAIN_NODE}", "State=RESUME")
            runner.tick()
            for name in [n for n, d in open_jobs.items() if finished(d)]:
                del open_jobs[name]
            time.sleep(max(0.0, TICK - (time.time() - now)))
        rec.ended_at = time.time()
    finally:
        rec.slurmctld_cpu = process_cpu(ctld) - cpu0
        rec.overhead = runner.overhead()
        if drained and rec.empty_at is None:
            cli.scontrol("update", f"NodeName={DRAIN_NODE}", "State=RESUME", check=False)
        runner.close()
        (rundir / "run.json").write_text(json.dumps(rec.to_json(), indent=1))
    return rec
