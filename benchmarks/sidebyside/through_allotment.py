"""Allotment deciding, Slurm running: the workload submitted to the real engine with the Slurm executor.

Owns: building the engine as benchmarks/bench_slurm.py does (allotment.engine.setup.build with executor "slurm",
examples/sidebyside on a temporary SQLite data directory, fleet sync every second so a Slurm drain reaches
Allotment at once), turning each planned job into a Submission (batch → guaranteed with a run slice covering its
work up to the policy's max_slice; opportunistic → the opportunistic contract; session → a session holding its
length), stepping the engine, and measuring the engine's own cost (cycle time, of which deciding).
Must not: pin, preempt or signal anything itself (the engine and its executor do), or change the engine.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from allotment.config import to_core
from allotment.core.model import ContractClass, JobKind
from allotment.engine.fleet_sync import SyncedExecutor
from allotment.engine.setup import Built, Settings, build
from allotment.executors.slurm import SlurmExecutor
from allotment.store.jobs import Submission, submit
from benchmarks.sidebyside.replay import worker_argv
from benchmarks.sidebyside.slurm_direct import GRACE
from benchmarks.sidebyside.workload import CONFIG, JobPlan, Kind, Scale

STEP_EVERY = 0.5
"""Wall seconds between engine cycles when nothing was submitted (a submission cycles at once)."""


class ThroughAllotment:
    """Submits every job to Allotment's store and steps the engine; Slurm only runs what the engine launches."""

    label = "Allotment deciding"

    def __init__(self, conf: str, data_dir: Path, scale: Scale, config: Path = CONFIG) -> None:
        self.scale = scale
        self.built: Built = build(
            Settings(config=config, data_dir=data_dir, executor="slurm", slurm_conf=Path(conf), fleet_sync_every=1)
        )
        self.max_slice = to_core(self.built.config).policy.max_slice
        self.cycles, self.cycle_s, self.decide_s = 0, 0.0, 0.0
        self.last_step, self.dirty = 0.0, False
        self.built.engine.reconcile()
        self._step()  # discovers the fleet from Slurm

    def submit(self, plan: JobPlan, jobdir: Path) -> None:
        session = plan.kind is Kind.SESSION
        slice_seconds = math.ceil(plan.work) + 5 if session else min(self.max_slice, math.ceil(plan.work * 1.2) + 5)
        sub = Submission(
            budget=plan.account,
            user=plan.user,
            command=worker_argv(plan, jobdir, self.scale, self_requeue=False),
            gpus=plan.gpus,
            replicas=plan.nodes,
            name=plan.name,
            kind=JobKind.SESSION if session else JobKind.BATCH,
            contract=ContractClass.OPPORTUNISTIC if plan.kind is Kind.OPPORTUNISTIC else ContractClass.GUARANTEED,
            slice_seconds=slice_seconds,
            grace=GRACE,
            requeue=not session,
        )
        with self.built.sessions.begin() as s:
            submit(s, sub, self.built.engine.clock.now())
        self.dirty = True

    def _step(self) -> None:
        t = time.perf_counter()
        report = self.built.engine.step()
        self.cycle_s += time.perf_counter() - t
        self.decide_s += report.timings.get("decide", 0.0)
        self.cycles += 1
        self.last_step, self.dirty = time.monotonic(), False

    def tick(self) -> None:
        if self.dirty or time.monotonic() - self.last_step >= STEP_EVERY:
            self._step()

    def overhead(self) -> dict[str, float]:
        return {"engine_cycles": float(self.cycles), "engine_cycle_s": self.cycle_s, "engine_decide_s": self.decide_s}

    def close(self) -> None:
        ex = self.built.engine.executor
        deadline = time.monotonic() + 30
        while (alive := ex.alive()) and time.monotonic() < deadline:
            for job_id, attempt in alive.items():
                ex.terminate(job_id, attempt, 0)
            ex.poll()
            time.sleep(0.2)
        inner = ex.inner if isinstance(ex, SyncedExecutor) else ex
        if isinstance(inner, SlurmExecutor):
            inner.close()
