"""Rule `opportunistic-entitlement` (decision 68): opportunistic work changes a job's guarantee and price, not its
budget's share. A budget below its fair share, with credits left, has its opportunistic jobs served beside
guaranteed work up to its share, and its running opportunistic work is no victim for another budget's guaranteed
work or plan unless giving it up makes the two budgets' shares fairer; sessions still take it."""

from __future__ import annotations

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import PreemptReason
from allotment.core.model import ContractClass
from tests.core.builders import HOUR, World, two_team_world
from tests.core.strategies import CheckedDriver

decide = AllotmentPolicy().decide
OPP = ContractClass.OPPORTUNISTIC
NOW = 10 * HOUR


def _two_budgets(red_usage: float, blue_usage: float, blue_balance: float | None = None) -> World:
    return (
        World()
        .cluster("c1", nodes=1)
        .budget("org", alloc=2000)
        .budget("red", "org", usage=red_usage)
        .budget("blue", "org", usage=blue_usage, balance=blue_balance)
    )


@pytest.mark.parametrize(
    ("blue_usage", "blue_balance", "red_usage", "taken"),
    [
        pytest.param(5000.0, None, 0.0, True, id="work-of-a-budget-over-its-share-yields"),
        pytest.param(0.0, None, 5000.0, False, id="work-of-a-budget-below-its-share-is-kept"),
        pytest.param(0.0, 0.0, 5000.0, True, id="work-of-a-budget-below-its-share-with-no-credits-yields"),
    ],
)
def test_a_guaranteed_job_takes_opportunistic_work_only_beyond_its_budgets_share(
    blue_usage: float, blue_balance: float | None, red_usage: float, taken: bool
) -> None:
    w = _two_budgets(red_usage, blue_usage, blue_balance)
    w.running("opp", "blue", {"c1-h100-00": 4}, started=NOW - HOUR, contract=OPP, grace=30)
    w.running("slice", "red", {"c1-h100-00": 4}, started=NOW - HOUR, slice_end=NOW + 6 * HOUR, grace=30)
    w.pending("want", "red", gpus=4, submitted_at=NOW - 60)
    d = decide(w.snapshot(), NOW)
    assert [p.job_id for p in d.preempts if p.reason is PreemptReason.FOR_GUARANTEED] == (["opp"] if taken else [])


def test_a_plan_of_a_budget_further_below_its_share_counts_on_it() -> None:
    """Plans are how no budget starves (promise 8): the plan of a budget further below its share than the holder's
    counts kept opportunistic work as leaving, as before, and tells it to leave only when its notice would end at the
    planned start (tests/core/test_reservations.py). A plan of a budget above the holder's standing does not (the
    first table: no plan takes blue's work at once there either)."""
    w = (
        World()
        .cluster("c1", nodes=1)
        .budget("org", alloc=3000)
        .budget("red", "org")
        .budget("blue", "org")
        .budget("green", "org", usage=8000.0)
    )
    w.running("opp", "blue", {"c1-h100-00": 4}, started=NOW - HOUR, contract=OPP, grace=30)
    w.running("slice", "green", {"c1-h100-00": 4}, started=NOW - HOUR, slice_end=NOW + 2 * HOUR, grace=30)
    w.pending("want", "red", gpus=8, submitted_at=NOW - 60)
    d = decide(w.snapshot(), NOW)
    assert not d.preempts  # blue is below its share: red's job may not take its work now
    assert [(r.job_id, r.gave_way) for r in d.reserves] == [("want", ("opp", "slice"))]


def test_a_gang_of_the_whole_cluster_plans_past_its_own_and_a_kept_opportunistic_job() -> None:
    """The Slurm integration test's case: red's own opportunistic job and blue's (kept: blue is at its share) hold
    two of four nodes and red asks for a gang of all four. Blue's job may not be preempted now; the plan counts
    both as leaving (red's own too — only a budget's own slice work never gives way to its plan) and tells each
    to leave once its notice would end at the planned start."""
    w = two_team_world(nodes=4)
    w.running("own", "red", {"c1-h100-00": 8}, started=NOW - 20, contract=OPP, grace=10)
    w.running("kept", "blue", {"c1-h100-01": 8}, started=NOW - 20, contract=OPP, grace=2)
    w.pending("gang", "red", gpus=8, replicas=4, submitted_at=NOW - 1)
    d = decide(w.snapshot(), NOW)
    [plan] = d.reserves
    assert (plan.job_id, plan.planned_start, plan.gave_way) == ("gang", NOW + 10, ("kept", "own"))
    assert [(p.job_id, p.reason) for p in d.preempts] == [("own", PreemptReason.RESERVATION)]  # 10 s notice: now
    assert d.wake_at == NOW + 8  # blue's job is told at the planned start less its 2 s grace


def test_a_session_still_takes_it() -> None:
    w = _two_budgets(red_usage=5000.0, blue_usage=0.0)
    w.running("opp", "blue", {"c1-h100-00": 8}, started=NOW - HOUR, contract=OPP, grace=0)
    w.session("sess", "red", gpus=2)
    d = decide(w.snapshot(), NOW)
    assert [(p.job_id, p.reason) for p in d.preempts] == [("opp", PreemptReason.FOR_SESSION)]


@pytest.mark.parametrize(
    ("red_usage", "first"),
    [
        pytest.param(0.0, "red-opp", id="below-its-share-opportunistic-work-is-served-beside-guaranteed-work"),
        pytest.param(5000.0, "blue-g", id="over-its-share-it-runs-on-what-guaranteed-work-leaves"),
    ],
)
def test_who_starts_on_the_last_free_gpus(red_usage: float, first: str) -> None:
    w = _two_budgets(red_usage=red_usage, blue_usage=500.0)
    w.running("slice", "blue", {"c1-h100-00": 4}, started=NOW - HOUR, slice_end=NOW + 6 * HOUR, grace=30)
    w.pending("red-opp", "red", gpus=4, submitted_at=NOW - 60, contract=OPP)
    w.pending("blue-g", "blue", gpus=4, submitted_at=NOW - 60)
    d = decide(w.snapshot(), NOW)
    assert [s.job_id for s in d.starts] == [first]


def test_over_many_rounds_a_budget_with_only_opportunistic_work_is_not_preempted_by_guaranteed_work() -> None:
    """Two budgets of equal allocation on 16 GPUs, both with more work than fits: red submits only opportunistic
    jobs, blue only guaranteed ones. Before the rule red's runs were taken by blue's jobs within a cycle and it held
    nothing after the first; now no guaranteed job preempts them. Blue's plans still take them at their planned
    starts (promise 8), so red holds less than its half (decision 68 has this as the rule's known limit)."""
    w = World().cluster("c1", nodes=2).budget("org", alloc=2000).budget("red", "org").budget("blue", "org")
    durations: dict[str, int] = {}
    for i in range(24):
        w.pending(f"r{i:02d}", "red", gpus=4, submitted_at=0, contract=OPP, grace=30)
        w.pending(f"b{i:02d}", "blue", gpus=4, submitted_at=0, slice_seconds=HOUR, grace=30)
        durations[f"r{i:02d}"] = durations[f"b{i:02d}"] = 2 * HOUR
    drv = CheckedDriver(w.snapshot(), durations, 0)
    held: list[int] = []
    for t in range(0, 12 * HOUR, 15 * 60):
        d = drv.step(t)
        assert not [p for p in d.preempts if p.reason is PreemptReason.FOR_GUARANTEED]
        held.append(sum(j.total_gpus for j in drv.jobs.values() if j.run and j.budget == "red"))
    assert sum(held) / len(held) >= 3
