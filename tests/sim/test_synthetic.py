"""The synthetic workload: no job larger than its budget's GPU limit, offered demand calibrated to the chosen multiple
of supply, and sizes drawn from each class's table (decision 70)."""

from __future__ import annotations

from pathlib import Path

import pytest

from allotment.config import load_config
from allotment.sim.synthetic import DEFAULT_CLASSES, SyntheticSpec, _allowed, generate
from allotment.sim.workload import placed_gpus

ROOT = Path(__file__).resolve().parents[2]
AI2 = ROOT / "examples" / "ai2" / "allotment.yaml"
PRETRAIN = next(c for c in DEFAULT_CLASSES if c.name == "pretrain").sizes
FINETUNE = next(c for c in DEFAULT_CLASSES if c.name == "finetune").sizes


@pytest.mark.parametrize(
    ("name", "sizes", "largest", "limit", "expected"),
    [
        ("no limit: every size that shares the largest cluster", PRETRAIN, 1024, None, {64, 128, 256}),
        ("gangs above half the largest cluster are left out", PRETRAIN, 256, None, {64, 128}),
        ("a limit leaves out the sizes above it", FINETUNE, 1024, 16, {8, 16}),
        ("a class wholly above the limit asks for the limit", PRETRAIN, 1024, 16, {16}),
        ("a limit above a node rounds down to whole nodes", PRETRAIN, 1024, 20, {16}),
        ("a limit within a node is asked for as it is", PRETRAIN, 1024, 4, {4}),
    ],
)
def test_sizes_a_budget_may_be_drawn(
    name: str, sizes: dict[int, float], largest: int, limit: int | None, expected: set[int]
) -> None:
    assert set(_allowed(sizes, largest, limit)) == expected, name


def test_no_job_is_larger_than_its_budgets_gpu_limit() -> None:
    cfg = load_config(AI2)
    workload = generate(AI2, SyntheticSpec(days=3, drain_days=0), seed=1)
    limited = {leaf.name: limit for leaf in cfg.leaves() if (limit := cfg.gpu_limit(leaf.name)) is not None}
    assert limited, "the Ai2-like lab has budgets with GPU limits"
    of_limited = [j for j in workload.jobs if j.budget in limited]
    assert of_limited
    assert all(placed_gpus(j.gpus * j.replicas) <= limited[j.budget] for j in of_limited)
    # the budget held to 16 GPUs still pretrains, on 16
    assert {j.gpus * j.replicas for j in workload.jobs if j.budget == "human-evals" and j.cls == "pretrain"} <= {16}


def test_offered_demand_is_the_chosen_multiple_of_supply() -> None:
    cfg = load_config(AI2)
    fleet = sum(cfg.gpus_by_type().values())
    days, demand = 14, 2.5
    offered = [
        sum(j.gpus * j.replicas * j.work for j in generate(AI2, SyntheticSpec(days=days, demand=demand), s).jobs)
        / (fleet * days * 86_400)
        for s in (1, 2, 3)
    ]
    # a seed's draw of long pretraining runs moves it by up to about a tenth; the mean stays near the target
    assert all(abs(x - demand) < 0.3 for x in offered), offered
    assert abs(sum(offered) / 3 - demand) < 0.15, offered
