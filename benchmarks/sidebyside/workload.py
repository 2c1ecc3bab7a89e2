"""The time-compressed workload both side-by-side runs replay: a scaled-down Ai2-like mix on 8 nodes × 8 GPUs.

Owns: the job list (arrival offset, account, kind, size, work) generated from a seed and two scale knobs — wall
seconds per "lab hour" and the arrival span in lab hours — and the account tree read from the Allotment
configuration (examples/sidebyside/allotment.yaml), with each leaf's entitled share (the product of its allocation
fractions along the path, as Fair Tree and Allotment's fair share both read it).
Must not: submit, time or measure anything (slurm_direct.py and through_allotment.py replay it; metrics.py reads
the results).

The mix, per lab hour of the arrival span: about 2.5 batch jobs (1, 2, 4 or 8 GPUs on one node, or a 2-node gang
of 8 GPUs each; 1–3 lab hours of work), one opportunistic job (4 or 8 GPUs, 2–3 lab hours), one interactive session
(1 or 2 GPUs, ½–1 lab hour) arriving while the cluster is full; two 4-node gangs (half the cluster) at 30 % and
60 % of the span; and at the start the cluster is filled (batch and opportunistic work) so every later arrival
meets a full cluster. Accounts submit unevenly (pretrain most, vision least), so the shares matter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from allotment.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "sidebyside" / "allotment.yaml"
NODES = 8
GPUS_PER_NODE = 8
DRAIN_NODE = "gpu03"
DRAIN_AT = 0.4
"""The drained node, and when it is drained (a fraction of the arrival span)."""
USERS = {"pretrain": "ada", "posttrain": "ben", "climate": "chen", "vision": "dana"}
DEMAND = {"pretrain": 0.4, "posttrain": 0.25, "climate": 0.2, "vision": 0.15}


class Kind(StrEnum):
    BATCH = "batch"
    OPPORTUNISTIC = "opportunistic"
    SESSION = "session"


@dataclass(frozen=True, slots=True)
class JobPlan:
    name: str
    at: float
    """Arrival, wall seconds after the replay starts."""
    account: str
    kind: Kind
    nodes: int
    gpus: int
    """GPUs per node."""
    work: float
    """Wall seconds of work to do (resumed from checkpoints after a preemption)."""

    @property
    def user(self) -> str:
        return USERS[self.account]

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus


@dataclass(frozen=True, slots=True)
class Scale:
    hour: float
    """Wall seconds per lab hour."""
    span: float
    """Arrival span in lab hours."""

    @property
    def span_seconds(self) -> float:
        return self.hour * self.span

    @property
    def drain_at(self) -> float:
        return DRAIN_AT * self.span_seconds


FULL = Scale(hour=15.0, span=12.0)
QUICK = Scale(hour=6.0, span=5.0)


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    parent: str | None
    shares: int
    """Fair Tree shares: the budget's allocation in whole credits."""


def accounts(config: Path = CONFIG) -> list[Account]:
    """The budget tree, parents before children."""
    cfg = load_config(config)
    return [Account(b.name, b.parent, int(b.allocation)) for b in cfg.budgets]


def entitled(tree: list[Account]) -> dict[str, float]:
    """Each leaf's entitled share of the fleet: its shares over its siblings', times its parent's entitlement."""
    by_parent: dict[str | None, list[Account]] = {}
    for a in tree:
        by_parent.setdefault(a.parent, []).append(a)
    out: dict[str, float] = {}

    def walk(parent: str | None, share: float) -> None:
        children = by_parent.get(parent, [])
        total = sum(c.shares for c in children)
        for c in children:
            mine = share * c.shares / total
            if c.name in by_parent:
                walk(c.name, mine)
            else:
                out[c.name] = mine

    walk(None, 1.0)
    return out


def generate(scale: Scale, seed: int = 7) -> list[JobPlan]:
    """The jobs of one replay, sorted by arrival."""
    rng = random.Random(seed)
    h, span = scale.hour, scale.span
    names = list(DEMAND)
    weights = [DEMAND[a] for a in names]
    plans: list[JobPlan] = []

    def add(at: float, account: str, kind: Kind, nodes: int, gpus: int, work_hours: float) -> None:
        plans.append(
            JobPlan(
                f"{kind.value[:4]}{len(plans):03d}", round(at, 2), account, kind, nodes, gpus, round(work_hours * h, 1)
            )
        )

    # The cluster full from the start: two 2-node gangs, single-node batch jobs, opportunistic work on the rest.
    add(0, "pretrain", Kind.BATCH, 2, 8, 3.0)
    add(0, "climate", Kind.BATCH, 2, 8, 2.5)
    add(0, "posttrain", Kind.BATCH, 1, 8, 2.0)
    add(0, "vision", Kind.BATCH, 1, 4, 1.5)
    add(0, "posttrain", Kind.BATCH, 1, 4, 2.0)
    add(0, "climate", Kind.OPPORTUNISTIC, 1, 8, 3.0)
    add(0, "vision", Kind.OPPORTUNISTIC, 1, 8, 2.5)
    n_batch = round(2.5 * span)
    for _ in range(n_batch):
        account = rng.choices(names, weights)[0]
        nodes, gpus = rng.choice([(1, 1), (1, 2), (1, 4), (1, 8), (1, 8), (2, 8)])
        add(rng.uniform(0.2, span) * h, account, Kind.BATCH, nodes, gpus, rng.uniform(1.0, 3.0))
    for frac, account in ((0.3, "pretrain"), (0.6, "climate")):
        add(frac * span * h, account, Kind.BATCH, 4, 8, 2.0)
    for i in range(round(span)):
        account = rng.choices(names, weights)[0]
        add((i + rng.uniform(0.1, 0.9)) * h, account, Kind.OPPORTUNISTIC, 1, rng.choice([4, 8]), rng.uniform(2, 3))
    for i in range(round(span)):
        account = rng.choice(names)
        add((i + rng.uniform(0.3, 0.9)) * h, account, Kind.SESSION, 1, rng.choice([1, 2]), rng.uniform(0.5, 1.0))
    return sorted(plans, key=lambda p: (p.at, p.name))
