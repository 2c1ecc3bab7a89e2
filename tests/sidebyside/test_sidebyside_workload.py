"""The side-by-side workload and account tree: what both runs replay must be the same, fit the cluster, and give
Slurm's Fair Tree and Allotment the same shares."""

from __future__ import annotations

import math

from benchmarks.sidebyside.workload import FULL, QUICK, Kind, Scale, accounts, entitled, generate
from hypothesis import given, settings
from hypothesis import strategies as st


def test_entitled_shares_follow_the_budget_tree() -> None:
    shares = entitled(accounts())
    assert shares == {"pretrain": 0.35, "posttrain": 0.25, "climate": 0.25, "vision": 0.15}
    assert math.isclose(sum(shares.values()), 1.0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([FULL, QUICK]))
def test_every_job_fits_and_arrives_within_the_span(seed: int, scale: Scale) -> None:
    plans = generate(scale, seed)
    assert plans == generate(scale, seed)  # deterministic: both runs replay the same jobs
    assert len({p.name for p in plans}) == len(plans)
    assert all(0 <= p.at <= scale.span_seconds and p.work > 0 for p in plans)
    assert all(p.gpus == 8 for p in plans if p.nodes > 1)  # multi-node gangs take whole nodes
    assert all(p.nodes == 1 and p.gpus <= 2 for p in plans if p.kind is Kind.SESSION)
    assert sum(1 for p in plans if p.nodes >= 4) == 2
    assert {p.kind for p in plans} == set(Kind)
