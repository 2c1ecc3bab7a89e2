"""Snapshots for the benchmarks: the Ai2-like example organisation under load, and a k-times larger copy of it.

Owns: building benchmark inputs from examples/ai2 (through the real configuration loader and the demo's sample
workload) and scaling a snapshot by replication (clusters, nodes, budgets and jobs copied k times under one root).
Must not: time anything.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from allotment.cli.sample import default_now, sample_snapshot
from allotment.config import load_config
from allotment.core.model import Account, Allocation, Budget, Job, Reservation, Run, Snapshot

ROOT = Path(__file__).resolve().parents[1]
AI2 = ROOT / "examples" / "ai2" / "allotment.yaml"


def ai2_snapshot(pending: int = 10_000, seed: int = 1) -> tuple[Snapshot, int]:
    """The Ai2-like fleet (≈4,096 GPUs in 512 nodes, ~60 budgets in 3 levels) with a busy fleet and `pending` jobs."""
    cfg = load_config(AI2)
    now = default_now(cfg)
    return sample_snapshot(cfg, seed=seed, now=now, pending=pending), now


def scaled(snap: Snapshot, k: int) -> Snapshot:
    """k copies of the snapshot side by side: clusters, nodes, budgets and jobs suffixed #i, under one new root."""
    if k == 1:
        return snap

    def tag(name: str, i: int) -> str:
        return f"{name}#{i}"

    roots = [b.name for b in snap.budgets if b.parent is None]
    clusters, nodes, budgets, jobs, reservations = [], [], [Budget("fleet", None, 0)], [], []
    accounts: dict[str, Account] = {}
    total_alloc = 0
    for i in range(k):
        clusters += [replace(c, name=tag(c.name, i)) for c in snap.clusters]
        nodes += [replace(n, name=tag(n.name, i), cluster=tag(n.cluster, i)) for n in snap.nodes]
        for b in snap.budgets:
            parent = "fleet" if b.name in roots else tag(b.parent or "", i)
            budgets.append(replace(b, name=tag(b.name, i), parent=parent))
            if b.name in roots:
                total_alloc += b.allocation
        accounts.update({tag(name, i): acc for name, acc in snap.accounts.items()})
        for j in snap.jobs:
            run = j.run
            if run is not None:
                run = Run(
                    tuple(Allocation(tag(a.node, i), a.gpus) for a in run.placement),
                    run.started_at,
                    run.run_class,
                    run.slice_end,
                    run.preemption,
                    run.idle_since,
                )
            jobs.append(
                replace(
                    j,
                    id=tag(j.id, i),
                    budget=tag(j.budget, i),
                    user=tag(j.user, i),
                    clusters=tuple(tag(c, i) for c in j.clusters),
                    run=run,
                )
            )
        reservations += [
            Reservation(tag(r.job_id, i), tuple((tag(n, i), g) for n, g in r.nodes), r.planned_start, r.kind)
            for r in snap.reservations
        ]
    budgets[0] = Budget("fleet", None, total_alloc)
    return replace(
        snap,
        clusters=tuple(clusters),
        nodes=tuple(nodes),
        budgets=tuple(budgets),
        accounts=accounts,
        jobs=tuple(jobs),
        reservations=tuple(reservations),
        windows=tuple(
            replace(w, id=tag(w.id, i), budget=tag(w.budget, i), cluster=tag(w.cluster, i))
            for i in range(k)
            for w in snap.windows
        ),
        policy=replace(snap.policy, headroom={tag(c, i): h for i in range(k) for c, h in snap.policy.headroom.items()}),
    )


def describe(snap: Snapshot) -> str:
    running = [j for j in snap.jobs if j.run is not None]
    pending = len(snap.jobs) - len(running)
    gpus = sum(n.gpus for n in snap.nodes)
    return (
        f"{gpus:,} GPUs in {len(snap.nodes):,} nodes, {len(snap.budgets)} budgets, "
        f"{len(running):,} running ({sum(j.run.gpu_count for j in running if j.run):,} GPUs), {pending:,} pending"
    )


def with_jobs(snap: Snapshot, jobs: list[Job]) -> Snapshot:
    return replace(snap, jobs=tuple(jobs))
