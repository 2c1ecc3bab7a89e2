"""The cycle's read-only view of its snapshot: indices built once, and the rules that depend on nothing else.

Owns: Indices — the snapshot, `now`, the policy, topology per cluster, budgets by name, leaf budgets, jobs by id,
node → pool, each budget's pending batch queue in its own order (sort_by_budget_order), GPU rates — and the pure
helpers over them every step needs: rates of pools and runs, grace, slice length, price, slice cost and whether a
job or occupant leaves within seconds.

Must not: change after it is built, or read anything the cycle decides (that is the Outcome's, outcome.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Final

from allotment.core.capacity import Capacity, Occupant, Pool, grace_of, is_quick
from allotment.core.model import (
    FULL_PRICE,
    Budget,
    ContractClass,
    Job,
    JobKind,
    Micro,
    PolicyConfig,
    RunClass,
    Seconds,
    Snapshot,
)
from allotment.core.units import cost

_BY_ID = attrgetter("id")


def sort_by_budget_order(jobs: list[Job]) -> None:
    """Sort one budget's jobs in its own order: priority (highest first), then age, then id.

    Each job's place is one packed integer, ((-priority) × span + submitted_at - lo) × n + position, where every
    submit time lies in [lo, lo + span) and position < n: a higher priority gives a key at least a whole span lower,
    so plain integers sort exactly as (-priority, submitted_at) tuples would, and the position comes back as key
    mod n (core performance rules: packed sort keys). The rare runs of equal priority and age are then put in id
    order."""
    n = len(jobs)
    if n < 2:
        return
    lo = hi = jobs[0].submitted_at
    for job in jobs:
        at = job.submitted_at
        if at < lo:
            lo = at
        elif at > hi:
            hi = at
    span = hi - lo + 1
    keys = [(-job.priority * span + (job.submitted_at - lo)) * n + i for i, job in enumerate(jobs)]
    keys.sort()
    jobs[:] = [jobs[k % n] for k in keys]
    i = 0
    while i < n:
        first = jobs[i]
        k = i + 1
        while k < n and jobs[k].priority == first.priority and jobs[k].submitted_at == first.submitted_at:
            k += 1
        if k - i > 1:
            jobs[i:k] = sorted(jobs[i:k], key=_BY_ID)
        i = k


class Indices:
    """Read-only indices over one snapshot, for one cycle (every attribute is Final)."""

    __slots__ = (
        "budgets",
        "jobs",
        "leaves",
        "node_pool",
        "now",
        "pol",
        "queues",
        "rates",
        "snap",
        "topology",
        "whole_rooms",
    )

    def __init__(self, snapshot: Snapshot, now: Seconds, cap: Capacity) -> None:
        self.snap: Final = snapshot
        self.now: Final = now
        self.pol: Final[PolicyConfig] = snapshot.policy
        self.rates: Final[Mapping[str, Micro]] = snapshot.rates
        self.topology: Final = {c.name: c.topology for c in snapshot.clusters}
        budgets: dict[str, Budget] = {b.name: b for b in snapshot.budgets}
        self.budgets: Final = budgets
        parents = {b.parent for b in snapshot.budgets if b.parent is not None}
        self.leaves: Final = {name for name in budgets if name not in parents}
        self.jobs: Final[dict[str, Job]] = {j.id: j for j in snapshot.jobs}
        self.node_pool: Final[dict[str, Pool]] = {s.node.name: s.pool for s in cap.nodes}
        queues: dict[str, list[Job]] = {}
        for job in snapshot.jobs:
            if job.run is None and job.kind is JobKind.BATCH:
                queues.setdefault(job.budget, []).append(job)
        for queue in queues.values():
            sort_by_budget_order(queue)
        self.queues: Final = queues
        """Pending batch jobs of each budget in the budget's own order: priority, then age, then id."""
        self.whole_rooms: Final = any(r.whole > 0 for r in snapshot.room.values())
        """Does any cluster keep a whole-node room (rule `node-shaped-room`)? Where none does, its checks are
        skipped."""

    def room_for(self, cluster: str) -> int:
        """Rule `session-room`: the GPUs the cluster keeps free or fast-leaving for sessions this cycle, as the shell
        sized them (Snapshot.room), else the policy's floor."""
        room = self.snap.room.get(cluster)
        return self.pol.headroom_for(cluster) if room is None else room.gpus

    def whole_for(self, cluster: str) -> int:
        """Rule `node-shaped-room`: how many of the room's GPUs must be on one node (0: any spread)."""
        room = self.snap.room.get(cluster)
        return 0 if room is None else room.whole

    def rate(self, pool: Pool) -> Micro:
        return self.rates.get(pool[1], 0)

    def rate_of_run(self, job: Job) -> Micro:
        if job.run is None or not job.run.placement:
            return 0
        pool = self.node_pool.get(job.run.placement[0].node)
        return 0 if pool is None else self.rate(pool)

    def balance(self, budget: str) -> Micro:
        acc = self.snap.accounts.get(budget)
        return acc.balance if acc is not None else 0

    def grace(self, job: Job) -> Seconds:
        return grace_of(job, self.pol.max_grace)

    def slice_length(self, job: Job) -> Seconds:
        if job.kind is JobKind.SESSION:
            return max(1, job.slice_seconds)
        return max(self.pol.min_slice, min(job.slice_seconds, self.pol.max_slice))

    def price(self, job: Job, run_class: RunClass) -> int:
        if run_class is RunClass.SESSION:
            return self.pol.session_price
        if run_class is RunClass.OPPORTUNISTIC:
            return self.pol.opportunistic_price
        return FULL_PRICE

    def slice_cost(self, job: Job, gpus: int, pool: Pool, length: Seconds) -> Micro:
        run_class = RunClass.SESSION if job.kind is JobKind.SESSION else RunClass.GUARANTEED
        return cost(gpus, self.rate(pool), self.price(job, run_class), length)

    def quick(self, job: Job) -> bool:
        """Would this job, once started, count as work that leaves within seconds (may sit in headroom)?"""
        return (
            job.contract is ContractClass.OPPORTUNISTIC
            and self.grace(job) <= self.pol.headroom_max_grace
            and job.kind is JobKind.BATCH
        )

    def quick_occupant(self, occ: Occupant) -> bool:
        """Is this running work fast-leaving (it may sit in session headroom)?"""
        return is_quick(occ.job, self.pol.headroom_max_grace, self.pol.max_grace)
