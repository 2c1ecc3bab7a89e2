"""A Slurm-like baseline: multifactor priority with Fair Tree fair share, and backfill (docs/baselines.md,
"slurm").

Owns:
- `fair_tree`: Slurm's Fair Tree over the budget tree — at each level every child's Level FS = S / U (S: its
  allocation over its siblings' allocations; U: its decayed usage over its siblings' usage; infinite without usage),
  children visited in decreasing Level FS (ties by name), depth first; leaf budgets are ranked in the order visited
  and get the factor rank / number of leaves (the first visited gets 1.0). Leaf budgets play Slurm's user
  associations (the snapshot has no per-user usage);
- the multifactor priority: weighted sum of the fair-share factor, the age factor (time waiting / 7 days, at most
  1), the job-size factor (GPUs / the fleet's GPUs: larger jobs first, Slurm's PriorityFavorSmall=NO default) and a
  QOS factor (the job's own priority over the highest priority of any job, negatives as 0);
- scheduling: jobs in priority order (then submit time, then id); each starts if it fits without delaying a
  planned start made earlier in the walk, else gets one of up to `max_reservations` planned starts from known end
  times (Slurm's backfill scheduler). No preemption (PreemptType=preempt/none); drained nodes empty as jobs end.

Must not: read a clock, do I/O or draw random numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from allotment.core.decisions import Decisions
from allotment.core.model import Budget, Job, Seconds, Snapshot
from allotment.policies.common import Frame, end_of_life, pending_jobs
from allotment.policies.queue import QueueRules, walk

DAY = 24 * 3600


@dataclass(frozen=True, slots=True)
class Weights:
    """PriorityWeight* of slurm.conf. The defaults follow the configuration example of Slurm's multifactor
    documentation (fair share 100000, age 1000, job size 1000), with its partition weight (10000) given to the QOS
    factor: one partition here, and the QOS is the job's own priority."""

    fairshare: int = 100_000
    age: int = 1_000
    job_size: int = 1_000
    qos: int = 10_000
    max_age: Seconds = 7 * DAY
    """PriorityMaxAge: the age factor reaches 1.0 after this long (Slurm's default, 7 days)."""


def fair_tree(budgets: Iterable[Budget], usage: Mapping[str, float]) -> dict[str, float]:
    """Fair Tree fair-share factors of the leaf budgets, in (0, 1]."""
    blist = sorted(budgets, key=lambda b: b.name)
    names = {b.name for b in blist}
    children: dict[str | None, list[Budget]] = {}
    for b in blist:
        children.setdefault(b.parent if b.parent in names else None, []).append(b)
    total_usage: dict[str, float] = {}

    def subtree_usage(b: Budget) -> float:
        kids = children.get(b.name, [])
        u = sum(subtree_usage(k) for k in kids) if kids else max(usage.get(b.name, 0.0), 0.0)
        total_usage[b.name] = u
        return u

    for root in children.get(None, []):
        subtree_usage(root)
    leaves = [b.name for b in blist if b.name not in children]
    ranked: list[str] = []

    def visit(parent: str | None) -> None:
        kids = children.get(parent, [])
        shares = sum(max(k.allocation, 0) for k in kids)
        used = sum(total_usage[k.name] for k in kids)

        def level_fs(k: Budget) -> float:
            s = max(k.allocation, 0) / shares if shares > 0 else 0.0
            u = total_usage[k.name] / used if used > 0 else 0.0
            if u <= 0:
                return float("inf") if s > 0 else 0.0
            return s / u

        for k in sorted(kids, key=lambda k: (-level_fs(k), k.name)):
            if k.name in children:
                visit(k.name)
            else:
                ranked.append(k.name)

    visit(None)
    n = len(leaves)
    return {name: (n - i) / n for i, name in enumerate(ranked)}


def priorities(snapshot: Snapshot, now: Seconds, weights: Weights) -> dict[str, float]:
    """The multifactor priority of every pending job."""
    usage = {name: acc.usage for name, acc in snapshot.accounts.items()}
    fs = fair_tree(snapshot.budgets, usage)
    fleet = max(1, sum(n.gpus for n in snapshot.nodes if n.accepts_work))
    top = max((j.priority for j in snapshot.jobs), default=0)
    out: dict[str, float] = {}
    for job in pending_jobs(snapshot):
        age = min(1.0, max(0, now - job.submitted_at) / weights.max_age) if weights.max_age > 0 else 1.0
        size = min(1.0, job.total_gpus / fleet)
        qos = max(0, job.priority) / top if top > 0 else 0.0
        out[job.id] = (
            weights.fairshare * fs.get(job.budget, 0.0)
            + weights.age * age
            + weights.job_size * size
            + weights.qos * qos
        )
    return out


class SlurmMultifactor:
    name = "slurm"

    def __init__(self, weights: Weights | None = None) -> None:
        self.weights = weights or Weights()

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        frame = Frame(snapshot, now)
        end_of_life(frame)
        prio = priorities(snapshot, now, self.weights)
        order: list[Job] = sorted(pending_jobs(snapshot), key=lambda j: (-prio[j.id], j.submitted_at, j.id))
        rules = QueueRules(rule="priority", plans_per_partition=None, plans_total=snapshot.policy.max_reservations)
        walk(frame, order, rules)
        return frame.decisions()
