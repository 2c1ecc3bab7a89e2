"""A synthetic workload for an organisation, calibrated on public statistics of GPU clusters.

Owns: drawing jobs (arrival times with diurnal and weekly cycles, class mix, sizes, durations, checkpoint
intervals, failures, session idle periods) for the leaf budgets of a configuration, scaled so that offered demand
is a chosen multiple of supply, and the users' habits the old scheduler rewarded (always asking for the top
priority; parking idle sessions to keep GPUs). Every number and its source is in docs/simulation.md.

Must not: run anything or read a clock. A seed fixes every draw.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from allotment.config import load_config
from allotment.core.model import ContractClass, JobKind
from allotment.sim.workload import GPUS_PER_NODE, SimJob, Workload, gang_shape, placed_gpus

DAY = 86_400
HOUR = 3_600


class JobClass(BaseModel):
    """One class of work: its share of arrivals, sizes (total GPUs, with weights) and a log-normal duration."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    share: float = Field(gt=0)
    sizes: dict[int, float]
    median_hours: float = Field(gt=0)
    sigma: float = Field(ge=0)
    """Log-normal shape of the duration."""
    max_hours: float = Field(gt=0)
    kind: JobKind = JobKind.BATCH
    contract: ContractClass = ContractClass.GUARANTEED
    slice_hours: float = 4.0
    checkpoint_minutes: float | None = 60.0
    fail_probability: float = Field(default=0.05, ge=0, le=1)
    priority: int = 0


DEFAULT_CLASSES: tuple[JobClass, ...] = (
    JobClass(
        name="session",
        share=0.25,
        sizes={1: 0.6, 2: 0.15, 4: 0.1, 8: 0.15},
        median_hours=1.5,
        sigma=0.7,
        max_hours=8,
        kind=JobKind.SESSION,
        slice_hours=4,
        checkpoint_minutes=None,
        fail_probability=0.0,
    ),
    JobClass(
        name="eval",
        share=0.35,
        sizes={1: 0.5, 2: 0.1, 4: 0.1, 8: 0.3},
        median_hours=0.5,
        sigma=1.0,
        max_hours=12,
        contract=ContractClass.OPPORTUNISTIC,
        slice_hours=1,
        checkpoint_minutes=None,
        fail_probability=0.08,
    ),
    JobClass(
        name="finetune",
        share=0.3,
        sizes={8: 0.5, 16: 0.3, 32: 0.15, 64: 0.05},
        median_hours=6,
        sigma=1.0,
        max_hours=72,
        slice_hours=4,
        checkpoint_minutes=60,
        fail_probability=0.05,
    ),
    JobClass(
        name="pretrain",
        share=0.1,
        sizes={64: 0.5, 128: 0.3, 256: 0.2},
        median_hours=24,
        sigma=0.8,
        max_hours=14 * 24,
        slice_hours=8,
        checkpoint_minutes=30,
        fail_probability=0.1,
    ),
)


class Habits(BaseModel):
    """Behaviours the old scheduler rewarded, as fractions of users."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    top_priority: float = Field(default=0.3, ge=0, le=1)
    """Users who always ask for the highest priority."""
    park_sessions: float = Field(default=0.2, ge=0, le=1)
    """Users who keep sessions open (mostly idle) for the whole session length to hold GPUs."""
    top: int = 100
    """The priority they ask for."""


class SyntheticSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    days: float = Field(default=14, gt=0)
    demand: float = Field(default=2.5, gt=0)
    """Offered GPU-hours ÷ the fleet's GPU-hours over the horizon."""
    diurnal: float = Field(default=0.5, ge=0, lt=1)
    """Amplitude of the daily cycle of arrivals (0: flat), peaking at 15:00."""
    weekend: float = Field(default=0.5, ge=0, le=1)
    """Arrival rate on Saturdays and Sundays relative to weekdays."""
    classes: tuple[JobClass, ...] = DEFAULT_CLASSES
    habits: Habits = Field(default_factory=Habits)
    drain_days: float = Field(default=3, ge=0)
    """Extra simulated days after the last arrival for the queue to drain."""


@dataclass(frozen=True, slots=True)
class _Member:
    budget: str
    user: str
    limit: int | None
    """The budget's GPU limit (`AllotmentConfig.gpu_limit`): no job drawn for it is larger."""


@dataclass
class _Draw:
    rng: random.Random
    members: list[_Member]
    weights: list[float]
    top_users: set[str] = field(default_factory=set)
    parkers: set[str] = field(default_factory=set)


def _rate(t: float, spec: SyntheticSpec) -> float:
    """Relative arrival rate at `t` seconds (second 0 is a Sunday midnight … the week is taken as Mon-first)."""
    day = int(t // DAY) % 7
    hour = (t % DAY) / HOUR
    daily = 1 + spec.diurnal * math.cos(2 * math.pi * (hour - 15) / 24)
    return daily * (spec.weekend if day in (5, 6) else 1.0)


def _allowed(sizes: dict[int, float], largest_cluster: int, limit: int | None = None) -> dict[int, float]:
    """The class's sizes (with their weights) without gangs above half the largest cluster (they could never share
    it) or holding more than the budget's GPU limit once placed (they could never start under it). A class whose
    every such size is above the limit asks for the most the limit holds: a team held to 16 GPUs pretrains on 16."""
    fits = {s: w for s, w in sizes.items() if s <= max(largest_cluster // 2, 1)}
    if limit is None or not fits:
        return fits
    within = {s: w for s, w in fits.items() if placed_gpus(s) <= limit}
    most = limit if limit <= GPUS_PER_NODE else limit // GPUS_PER_NODE * GPUS_PER_NODE
    return within or {min(most, max(fits)): 1.0}


def _mean_size(sizes: dict[int, float], largest_cluster: int, limit: int | None = None) -> float:
    options = _allowed(sizes, largest_cluster, limit)
    return sum(s * w for s, w in options.items()) / sum(options.values())


def _draw_size(rng: random.Random, sizes: dict[int, float], largest_cluster: int, limit: int | None) -> int:
    options = _allowed(sizes, largest_cluster, limit)
    return rng.choices(list(options), weights=list(options.values()))[0]


def generate(config: Path, spec: SyntheticSpec, seed: int, name: str = "synthetic") -> Workload:
    """Jobs for every leaf budget of `config` (chosen in proportion to allocations, by its members), offering
    `spec.demand` times the fleet's GPU-hours over `spec.days`."""
    cfg = load_config(config)
    fleet = sum(cfg.gpus_by_type().values())
    clusters: dict[str, int] = {}
    for (cluster, _gpu_type), size in cfg.pool_sizes().items():
        clusters[cluster] = clusters.get(cluster, 0) + size
    largest = max(clusters.values())
    rng = random.Random(seed)
    members: list[_Member] = []
    weights: list[float] = []
    for leaf in cfg.leaves():
        users = [m.user for m in leaf.members] or [m.user for b in cfg.budgets for m in b.members][:1]
        for user in users:
            members.append(_Member(leaf.name, user, cfg.gpu_limit(leaf.name)))
            weights.append(float(leaf.allocation) / len(users))
    everyone = sorted({m.user for m in members})
    draw = _Draw(rng, members, weights)
    draw.top_users = {u for u in everyone if rng.random() < spec.habits.top_priority}
    draw.parkers = {u for u in everyone if rng.random() < spec.habits.park_sessions}
    classes = tuple(c for c in spec.classes if _allowed(c.sizes, largest))
    if not classes:
        raise ValueError(f"no job class fits {config}: every size is above half its largest cluster")
    spec = spec.model_copy(update={"classes": classes})
    total_share = sum(c.share for c in spec.classes)
    by_limit: dict[int | None, float] = {}
    for m, w in zip(members, weights, strict=True):
        by_limit[m.limit] = by_limit.get(m.limit, 0.0) + w
    mean_gpu_hours = sum(
        c.share
        / total_share
        * sum(w * _mean_size(c.sizes, largest, limit) for limit, w in by_limit.items())
        / sum(by_limit.values())
        * min(c.median_hours * math.exp(c.sigma**2 / 2), c.max_hours)
        for c in spec.classes
    )
    horizon = spec.days * DAY
    target = spec.demand * fleet * spec.days * 24
    mean_rate = target / mean_gpu_hours / horizon  # arrivals per second on average
    peak = (1 + spec.diurnal) * mean_rate / _mean_rate_factor(spec)
    jobs: list[SimJob] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= horizon:
            break
        if rng.random() * peak > _rate(t, spec) * mean_rate / _mean_rate_factor(spec):
            continue  # thinning: a non-homogeneous Poisson process
        jobs.append(_job(draw, spec, len(jobs), int(t), largest))
    notes = (
        f"synthetic: {len(jobs)} jobs over {spec.days:g} days on {fleet} GPUs, offered demand {spec.demand:g}× supply",
        f"habits: {len(draw.top_users)} of {len(everyone)} users always ask for priority {spec.habits.top}; "
        f"{len(draw.parkers)} park idle sessions",
    )
    return Workload(name, config, tuple(jobs), int(horizon + spec.drain_days * DAY), notes)


def _mean_rate_factor(spec: SyntheticSpec) -> float:
    """The week's average of `_rate` (diurnal averages to 1; weekends scale two days of seven)."""
    return (5 + 2 * spec.weekend) / 7


def _job(draw: _Draw, spec: SyntheticSpec, index: int, at: int, largest_cluster: int) -> SimJob:
    rng = draw.rng
    c = rng.choices(spec.classes, weights=[x.share for x in spec.classes])[0]
    who = rng.choices(draw.members, weights=draw.weights)[0]
    size = _draw_size(rng, c.sizes, largest_cluster, who.limit)
    hours = min(rng.lognormvariate(math.log(c.median_hours), c.sigma), c.max_hours)
    work = max(int(hours * HOUR), 60)
    gpus, replicas = gang_shape(size)
    idle: tuple[tuple[int, int], ...] = ()
    if c.kind is JobKind.SESSION:
        if who.user in draw.parkers:
            work = int(c.max_hours * HOUR)  # parked: held for the whole allowed length, used for the first hour
            idle = ((HOUR, work),)
        else:
            gap = rng.uniform(0.2, 0.6) * work
            idle = ((int(work * 0.4), int(work * 0.4 + gap)),) if gap >= 600 else ()
    priority = spec.habits.top if who.user in draw.top_users else c.priority + rng.randint(0, 20)
    return SimJob(
        id=f"{c.name[:2]}{index:06d}",
        submit=at,
        budget=who.budget,
        user=who.user,
        gpus=gpus,
        replicas=replicas,
        work=work,
        kind=c.kind,
        contract=c.contract,
        slice_seconds=_slice(c, work, who.user in draw.parkers),
        priority=priority,
        checkpoint=int(c.checkpoint_minutes * 60) if c.checkpoint_minutes else None,
        fail_probability=c.fail_probability,
        idle=idle,
        cls=c.name,
    )


def _slice(c: JobClass, work: int, parked: bool) -> int:
    """The requested run slice; for a session its requested length (the whole allowed length when parked)."""
    if c.kind is not JobKind.SESSION:
        return int(c.slice_hours * HOUR)
    longest = int(c.max_hours * HOUR)
    return longest if parked else min(max(work, 1800), longest)
