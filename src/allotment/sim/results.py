"""What a simulation leaves behind: plain records read back from the store and the simulated executor.

Owns: `JobRecord`, `RunRecord`, `DrainRecord` and `SimResult` (one policy on one workload), with a stable JSON
form so a result can be saved, compared and fed to the report. Times are seconds from the start of the simulation.

Must not: compute metrics (metrics.py) or run anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from allotment.core.model import Micro, Seconds


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    budget: str
    user: str
    cls: str
    gpus: int
    """GPUs in all (GPUs per replica × replicas)."""
    submit: Seconds
    first_start: Seconds | None
    end: Seconds | None
    """When its last run ended, once the job is finished (None while it waits or runs)."""
    state: str
    work: Seconds
    deadline: Seconds | None = None
    """When it had to be finished by (job lists with a `deadline` column)."""
    first_eta: Seconds | None = None
    """The estimated start its first wait reason gave (None: it started at once, or was given none)."""
    own_limit: bool = False
    """A session told at least once that it waits on its own limit (its user's sessions, or its budget's limit)."""
    contract: str = "guaranteed"
    """The contract class it was submitted with (`guaranteed` or `opportunistic`)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    job_id: str
    attempt: int
    start: Seconds
    end: Seconds | None
    gpus: int
    nodes: tuple[str, ...]
    run_class: str
    preempt_reason: str | None
    lost_work: Seconds
    """Seconds of this run's work that no checkpoint kept (0 when it finished)."""


@dataclass(frozen=True, slots=True)
class DrainRecord:
    node: str
    at: Seconds
    hard: bool
    """True: the node failed at once (its work was lost); False: it was drained."""


@dataclass(frozen=True, slots=True)
class SimResult:
    name: str
    policy: str
    seed: int
    duration: Seconds
    fleet_gpus: int
    allocations: Mapping[str, Micro]
    """Leaf budget → allocation per period."""
    jobs: tuple[JobRecord, ...]
    runs: tuple[RunRecord, ...]
    drains: tuple[DrainRecord, ...]
    balances: Mapping[str, Micro]
    """"budget@period" → closing balance (allocation − charges + refunds ± adjustments)."""
    exhausted: Mapping[str, Seconds]
    """Leaf budget → when its balance first reached zero in a period (absent: never)."""
    cycles: int
    events: int
    wall_seconds: float
    decide_seconds: float
    notes: tuple[str, ...] = ()
    burn: Mapping[str, tuple[tuple[Seconds, Micro], ...]] = field(default_factory=dict)
    """Leaf budget → (seconds from the start, balance) after each change in the first period (for burn-down plots)."""
    idle: tuple[tuple[Seconds, tuple[int, ...]], ...] = ()
    """(seconds from the start, idle GPUs per cause in sim.observe.IDLE_CAUSES order) at every change."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """Leaf budget → the most GPUs it may hold at once: the smallest `max_gpus` of it and its ancestors (absent: no
    limit)."""
    group_limits: Mapping[str, tuple[tuple[str, ...], int]] = field(default_factory=dict)
    """Budget with a GPU limit over several leaves → (those leaves, the most GPUs they may hold together)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
