"""The demo's sample workload: deterministic, consistent with the fleet, and the promised mix of work."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from allotment.cli.sample import default_now, default_pending, sample_snapshot
from allotment.config import AllotmentConfig, load_config
from allotment.core.model import ContractClass, JobKind, NodeState, RunClass, Snapshot

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cfg() -> AllotmentConfig:
    return load_config(ROOT / "examples" / "ai2" / "allotment.yaml")


@pytest.fixture(scope="module")
def snap(cfg: AllotmentConfig) -> Snapshot:
    return sample_snapshot(cfg, seed=7, now=default_now(cfg), pending=default_pending(cfg))


def test_same_seed_same_snapshot(cfg: AllotmentConfig, snap: Snapshot) -> None:
    again = sample_snapshot(cfg, seed=7, now=default_now(cfg), pending=default_pending(cfg))
    assert again == snap
    other = sample_snapshot(cfg, seed=8, now=default_now(cfg), pending=default_pending(cfg))
    assert other != snap


def test_running_work_fits_the_fleet(snap: Snapshot) -> None:
    nodes = {n.name: n for n in snap.nodes}
    held: Counter[tuple[str, int]] = Counter()
    for job in snap.jobs:
        if job.run is None:
            continue
        assert job.run.gpu_count == job.total_gpus
        clusters = {nodes[a.node].cluster for a in job.run.placement}
        assert len(clusters) == 1, "a gang never spans clusters"
        for a in job.run.placement:
            node = nodes[a.node]
            assert node.state is not NodeState.DOWN
            assert len(a.gpus) == job.gpus
            if job.replicas > 1:
                assert len(a.gpus) == node.gpus, "multi-node gangs hold whole nodes"
            for g in a.gpus:
                assert 0 <= g < node.gpus
                held[a.node, g] += 1
    assert max(held.values()) == 1, "no GPU is held twice"
    usable = sum(n.gpus for n in snap.nodes if n.state is not NodeState.DOWN)
    assert 0.8 * usable <= len(held) <= 0.95 * usable


def test_the_mix_of_work(cfg: AllotmentConfig, snap: Snapshot) -> None:
    now = default_now(cfg)
    running = [j for j in snap.jobs if j.run is not None]
    pending = [j for j in snap.jobs if j.run is None]
    assert len(pending) == 2048
    small = sum(1 for j in pending if j.total_gpus <= 8)
    gangs = [j for j in pending if 64 <= j.total_gpus <= 512]
    assert small / len(pending) > 0.85
    assert 20 <= len(gangs) <= 0.06 * len(pending)
    assert sum(1 for j in pending if j.kind is JobKind.SESSION) > 50
    assert sum(1 for j in pending if j.contract is ContractClass.OPPORTUNISTIC) > 100
    classes = Counter(j.run.run_class for j in running if j.run is not None)
    assert classes[RunClass.GUARANTEED] > classes[RunClass.OPPORTUNISTIC] > classes[RunClass.SESSION] > 0
    assert any(j.run is not None and j.run.slice_end is not None and j.run.slice_end <= now for j in running)
    assert any(j.run is not None and j.run.idle_since is not None for j in running)
    assert any(j.total_gpus >= 64 for j in running)
    assert all(j.submitted_at <= now for j in snap.jobs)


def test_budgets_and_members(cfg: AllotmentConfig, snap: Snapshot) -> None:
    leaves = {b.name for b in cfg.leaves()}
    assert set(snap.accounts) == leaves
    assert {j.budget for j in snap.jobs} <= leaves
    for job in snap.jobs[:200]:
        assert job.user in {m.user for m in cfg.members(job.budget)}
    allocation = {b.name: b.allocation for b in snap.budgets}
    low = [b for b, a in snap.accounts.items() if a.balance < allocation[b] * 0.05]
    assert len(low) >= 3, "several budgets run low"
    assert all(a.balance <= allocation[b] for b, a in snap.accounts.items())
