"""What a simulated workload is made of: jobs with their true behaviour, and the users' habits that shape them.

Owns: `SimJob` (a submission plus what the job really does — how much work, how often it checkpoints, whether it
fails, when a session's user is attached) and `Workload` (the jobs in arrival order with the organisation they are
submitted to). Times are seconds from the start of the simulation.

Must not: generate jobs (synthetic.py and traces.py do), run anything, or read a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from allotment.core.model import ContractClass, JobKind, Seconds

GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class SimJob:
    id: str
    submit: Seconds
    """Seconds from the start of the simulation."""
    budget: str
    user: str
    gpus: int
    """GPUs per replica."""
    replicas: int
    work: Seconds
    """Seconds of uninterrupted running the job needs to finish (a session: how long its user keeps it)."""
    kind: JobKind = JobKind.BATCH
    contract: ContractClass = ContractClass.GUARANTEED
    slice_seconds: Seconds = 4 * 3600
    priority: int = 0
    checkpoint: Seconds | None = 3600
    """Seconds between checkpoints; a preemption loses the work since the last one. None: never checkpoints."""
    fail_probability: float = 0.0
    """Chance that an attempt crashes by itself (exit code 1) at a uniformly drawn point of its remaining work."""
    idle: tuple[tuple[Seconds, Seconds], ...] = ()
    """Sessions: [from, to) offsets from the session's start during which its user is detached."""
    grace: Seconds = 60
    fallback_opportunistic: bool = True
    cls: str = "batch"
    """The class the report groups waits by: session, batch, opportunistic, eval, pretrain …"""
    clusters: tuple[str, ...] = ()
    """Clusters the job may run on (empty: any)."""
    gpu_types: tuple[str, ...] = ()
    """GPU types the job may run on (empty: any)."""
    max_runtime: Seconds | None = None
    """The job's time limit (it is stopped there; backfilling baselines plan with it)."""
    deadline: Seconds | None = None
    """When it must have finished, in seconds from the start of the simulation (the report counts deadlines met)."""

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.replicas


def gang_shape(gpus: int, per_node: int = GPUS_PER_NODE) -> tuple[int, int]:
    """(GPUs per replica, replicas) for a job asking `gpus` GPUs in all: up to a node's worth on one node, larger
    ones as whole nodes (consolidated placement, rounded up to whole nodes)."""
    if gpus <= per_node:
        return max(gpus, 1), 1
    return per_node, -(-gpus // per_node)


def placed_gpus(gpus: int, per_node: int = GPUS_PER_NODE) -> int:
    """GPUs a job asking `gpus` holds once placed (whole nodes beyond one node)."""
    g, replicas = gang_shape(gpus, per_node)
    return g * replicas


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    config: Path
    """The Allotment configuration (fleet, budgets, users, policy) the jobs are submitted to."""
    jobs: Sequence[SimJob]
    """In arrival order."""
    horizon: Seconds
    """The simulation stops here even if work is left (what is left counts as unfinished)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """How the workload was built (trace, sizing rule, budgets rule), for the report."""
