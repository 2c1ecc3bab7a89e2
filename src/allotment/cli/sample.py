"""A deterministic sample workload for the demo: a busy fleet, a backlog of pending jobs and budget standings.

Owns: building a core `Snapshot` from a configuration, a seed and an instant — running jobs with placements and
run slices (guaranteed, opportunistic and session runs, some slices due for renewal, some sessions idle), a
backlog of pending jobs in a realistic mix (mostly 1–8 GPU batch jobs, a few 64–512 GPU gangs, sessions,
opportunistic jobs), and accounts whose balances follow the period's progress, with several budgets nearly
exhausted.

Must not: decide anything (that is the core's job) or read clocks and files: the same configuration, seed and
instant always give the same snapshot. It uses `random.Random(seed)`; the CLI is the shell, not the core.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from allotment.config import AllotmentConfig, CoreConfig, to_core
from allotment.core.model import (
    Account,
    Allocation,
    ContractClass,
    Job,
    JobKind,
    Node,
    NodeState,
    Run,
    RunClass,
    Seconds,
    Snapshot,
)

HOUR = 3600
BUSY_TARGET = 0.88
"""Fraction of the usable GPUs the sample fills with running work."""


@dataclass(slots=True)
class _Free:
    """Free GPU indices per node of one pool, in node-name order (so consecutive nodes share racks)."""

    nodes: list[Node]
    free: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.free = {n.name: list(range(n.gpus)) for n in self.nodes}

    def whole_nodes(self, count: int) -> list[Node] | None:
        """`count` wholly free nodes, preferring a consecutive run."""
        empty = [n for n in self.nodes if len(self.free[n.name]) == n.gpus]
        if len(empty) < count:
            return None
        names = [n.name for n in self.nodes]
        for i in range(len(empty) - count + 1):
            run = empty[i : i + count]
            if names.index(run[-1].name) - names.index(run[0].name) == count - 1:
                return run
        return empty[:count]

    def take(self, node: Node, gpus: int) -> Allocation:
        taken, self.free[node.name] = self.free[node.name][:gpus], self.free[node.name][gpus:]
        return Allocation(node.name, tuple(taken))


@dataclass(slots=True)
class _Builder:
    cfg: AllotmentConfig
    core: CoreConfig
    rng: random.Random
    now: Seconds
    leaves: list[str] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    users: dict[str, list[str]] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    counter: int = 0

    def __post_init__(self) -> None:
        self.leaves = [b.name for b in self.cfg.leaves()]
        self.weights = [max(1, int(self.cfg.budget(b).allocation)) for b in self.leaves]
        for name in self.leaves:
            people = [m.user for m in self.cfg.members(name)]
            self.users[name] = people or [f"{name}-user"]

    def next_id(self) -> str:
        self.counter += 1
        return f"job-{self.counter:05d}"

    def budget(self) -> str:
        return self.rng.choices(self.leaves, weights=self.weights)[0]

    def user(self, budget: str) -> str:
        return self.rng.choice(self.users[budget])

    def slice_seconds(self) -> Seconds:
        policy = self.core.policy
        choice = self.rng.choice([HOUR // 2, HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR])
        return max(policy.min_slice, min(policy.max_slice, choice))

    # Running work -------------------------------------------------------------------------------------------

    def running(self, budget: str, placement: tuple[Allocation, ...], gpus: int, replicas: int) -> None:
        policy = self.core.policy
        roll = self.rng.random()
        slice_seconds = self.slice_seconds()
        kind, contract = JobKind.BATCH, ContractClass.GUARANTEED
        idle_since: Seconds | None = None
        if replicas == 1 and gpus <= policy.session_max_gpus and roll < 0.06:
            kind, run_class = JobKind.SESSION, RunClass.SESSION
            slice_seconds = min(policy.session_max_length, self.rng.choice([2 * HOUR, 4 * HOUR, 8 * HOUR]))
            started = self.now - self.rng.randrange(60, slice_seconds - 60)
            slice_end: Seconds | None = started + slice_seconds
            if self.rng.random() < 0.3:  # detached a while ago; some past the idle timeout
                idle_since = max(started, self.now - self.rng.randrange(60, 2 * policy.session_idle_timeout))
        elif roll < 0.22:
            contract, run_class = ContractClass.OPPORTUNISTIC, RunClass.OPPORTUNISTIC
            started = self.now - self.rng.randrange(60, 12 * HOUR)
            slice_end = None
        else:
            run_class = RunClass.GUARANTEED
            if roll < 0.30:  # the slice just ended: due for renewal or lapse this cycle
                started = self.now - slice_seconds - self.rng.randrange(0, 300)
            else:
                started = self.now - self.rng.randrange(60, slice_seconds)
            slice_end = started + slice_seconds
        self.jobs.append(
            Job(
                id=self.next_id(),
                budget=budget,
                user=self.user(budget),
                gpus=gpus,
                replicas=replicas,
                kind=kind,
                contract=contract,
                slice_seconds=slice_seconds,
                priority=self.rng.randrange(0, 4),
                grace=self.rng.choice([30, 60, 120, 300, 600]),
                submitted_at=started - self.rng.randrange(0, 6 * HOUR),
                requeue=True,
                run=Run(
                    placement=placement,
                    started_at=started,
                    run_class=run_class,
                    slice_end=slice_end,
                    idle_since=idle_since,
                ),
            )
        )

    def fill(self) -> None:
        """Run work on every pool until about BUSY_TARGET of its usable GPUs are held."""
        pools: dict[tuple[str, str], list[Node]] = {}
        for node in self.core.nodes:
            if node.state is not NodeState.DOWN and not node.forced:
                pools.setdefault((node.cluster, node.gpu_type), []).append(node)
        big = sorted(self.leaves, key=lambda b: -self.cfg.budget(b).allocation)[: max(1, len(self.leaves) // 4)]
        for nodes in pools.values():
            free = _Free(sorted(nodes, key=lambda n: n.name))
            total = sum(n.gpus for n in nodes)
            busy = 0
            # A few large gangs first (whole nodes, consecutive), about a third of the pool.
            while len(nodes) >= 16 and busy < total * 0.35:
                per_node = nodes[0].gpus
                size = self.rng.choice([64, 128, 256])
                count = min(size // per_node, len(nodes) // 3)
                if count < 2:
                    break
                chosen = free.whole_nodes(count)
                if chosen is None:
                    break
                placement = tuple(free.take(n, n.gpus) for n in chosen)
                self.running(self.rng.choice(big), placement, per_node, count)
                busy += per_node * count
            # Then small jobs on single nodes.
            attempts = 0
            while busy < total * BUSY_TARGET and attempts < 20 * len(nodes):
                attempts += 1
                node = self.rng.choice(nodes)
                room = len(free.free[node.name])
                want = self.rng.choices([1, 2, 4, 8], weights=[25, 15, 25, 35])[0]
                if room == 0 or want > room:
                    continue
                self.running(self.budget(), (free.take(node, want),), want, 1)
                busy += want

    # Pending work -------------------------------------------------------------------------------------------

    def pending(self, count: int) -> None:
        policy = self.core.policy
        types = sorted({n.gpu_type for n in self.core.nodes})
        pools = sorted({(n.cluster, n.gpu_type) for n in self.core.nodes})
        per_node = max(n.gpus for n in self.core.nodes)
        for _ in range(count):
            budget = self.budget()
            roll = self.rng.random()
            kind, contract = JobKind.BATCH, ContractClass.GUARANTEED
            replicas = 1
            slice_seconds = self.slice_seconds()
            if roll < 0.04:  # a multi-node gang of 64–512 GPUs
                gpus = per_node
                replicas = self.rng.choice([8, 8, 16, 16, 32, 64]) * 8 // per_node
            elif roll < 0.10:
                kind = JobKind.SESSION
                gpus = self.rng.choice([1, 1, 2, 4, 8][: 5 if policy.session_max_gpus >= 8 else 3])
                slice_seconds = min(policy.session_max_length, self.rng.choice([HOUR, 2 * HOUR, 4 * HOUR]))
            elif roll < 0.20:
                contract = ContractClass.OPPORTUNISTIC
                gpus = self.rng.choice([1, 2, 4, 8])
            else:
                gpus = self.rng.choices([1, 2, 4, 8], weights=[30, 15, 20, 35])[0]
                if gpus == 8 and self.rng.random() < 0.15:
                    replicas = 2
            gpu_types: tuple[str, ...] = ()
            if self.rng.random() < 0.5:
                gpu_types = (self.rng.choice(types),)
            allowed: tuple[str, ...] = ()
            if self.rng.random() < 0.1:  # pinned to one cluster that has the GPUs it asks for
                fits = [c for c, t in pools if not gpu_types or t in gpu_types]
                allowed = (self.rng.choice(sorted(set(fits))),)
            self.jobs.append(
                Job(
                    id=self.next_id(),
                    budget=budget,
                    user=self.user(budget),
                    gpus=gpus,
                    replicas=replicas,
                    kind=kind,
                    contract=contract,
                    slice_seconds=slice_seconds,
                    priority=self.rng.randrange(0, 4),
                    grace=self.rng.choice([30, 60, 120, 300, 600]),
                    submitted_at=self.now - self.rng.randrange(0, 48 * HOUR),
                    gpu_types=gpu_types,
                    clusters=allowed,
                    fallback_opportunistic=contract is ContractClass.GUARANTEED and self.rng.random() < 0.15,
                )
            )

    # Accounts -----------------------------------------------------------------------------------------------

    def accounts(self) -> dict[str, Account]:
        start, end = self.cfg.period.bounds(datetime.fromtimestamp(self.now, UTC))
        elapsed = (self.now - int(start.timestamp())) / (int(end.timestamp()) - int(start.timestamp()))
        allocations = {b.name: b.allocation for b in self.core.budgets}
        low = set(self.rng.sample(self.leaves, k=min(len(self.leaves), max(1, len(self.leaves) // 10))))
        out: dict[str, Account] = {}
        for name in self.leaves:
            allocation = allocations[name]
            if name in low:  # nearly exhausted: between −1 % and 3 % of the allocation left
                balance = allocation * self.rng.randrange(-10, 30) // 1000
            else:
                spent = min(0.95, elapsed * self.rng.uniform(0.5, 1.3))
                balance = int(allocation * (1 - spent))
            usage = (allocation - balance) / 1_000_000 * self.rng.uniform(0.3, 0.7)
            out[name] = Account(balance=balance, usage=max(0.0, usage))
        return out


def sample_snapshot(cfg: AllotmentConfig, *, seed: int, now: Seconds, pending: int) -> Snapshot:
    """A deterministic snapshot of `cfg`'s fleet at `now`: busy, with `pending` jobs waiting."""
    core = to_core(cfg)
    builder = _Builder(cfg, core, random.Random(seed), now)
    builder.fill()
    builder.pending(pending)
    return Snapshot(
        clusters=core.clusters,
        nodes=core.nodes,
        rates=core.rates,
        budgets=core.budgets,
        accounts=builder.accounts(),
        jobs=tuple(builder.jobs),
        windows=core.windows,
        policy=core.policy,
    )


def default_now(cfg: AllotmentConfig) -> Seconds:
    """The demo's instant: ten days and fourteen hours into the configuration's first period."""
    return int(cfg.period.start_of(0).timestamp()) + 10 * 24 * HOUR + 14 * HOUR


def default_pending(cfg: AllotmentConfig) -> int:
    """A backlog of about one pending job for every two GPUs (a few thousand for the Ai2-like lab)."""
    return max(20, sum(cfg.gpus_by_type().values()) // 2)


def job_gpus(jobs: Sequence[Job]) -> int:
    return sum(j.run.gpu_count for j in jobs if j.run is not None)
