"""Every baseline runs through the real engine (a real store, the simulated executor, a manual clock): its decisions
are applied, launched, ended and charged like the Allotment policy's, for a few rounds."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from allotment.core.model import ContractClass
from allotment.executors.simulated import Outcome
from allotment.policies import make_policy, policy_names
from allotment.store.tables import PendingReasonRow
from tests.engine.rig import Rig


def rig_with(db: Engine, policy: str) -> Rig:
    rig = Rig(db)
    rig.engine.policy = make_policy(policy)
    return rig


@pytest.mark.parametrize("policy", policy_names())
def test_a_baseline_runs_a_queue_to_completion_through_the_engine(db: Engine, policy: str) -> None:
    rig = rig_with(db, policy)
    t = rig.clock.now()
    owners = [
        ("pretrain", "ben"),
        ("finetune", "eli"),
        ("detection", "dana"),
        ("pretrain", "chen"),
        ("finetune", "chen"),
    ]
    budget_of = {
        rig.submit(f"j{i}", budget, user, 8, outcome=Outcome(duration=1000 + 100 * i), max_runtime=3000): budget
        for i, (budget, user) in enumerate(owners)
    }
    jobs = list(budget_of)
    rig.step()
    states = [rig.state(j) for j in jobs]
    assert states.count("running") == 4 and states.count("pending") == 1
    with rig.sessions() as s:
        (waiting,) = s.scalars(select(PendingReasonRow.job_id)).all()
    assert rig.state(waiting) == "pending"
    for at in (t + 1100, t + 1300, t + 2500, t + 3000):
        rig.step(at)
    assert [rig.state(j) for j in jobs] == ["completed"] * 5
    for budget in ("pretrain", "finetune", "detection"):
        assert rig.charged(budget) == sum(rig.held_cost(j) for j, b in budget_of.items() if b == budget) > 0


@pytest.mark.parametrize(
    ("policy", "urgent", "reason"),
    [("priority", {"priority": 9}, "priority"), ("kueue", {}, "fair-share")],
)
def test_a_preempting_baseline_preempts_requeues_and_starts_through_the_engine(
    db: Engine,
    policy: str,
    urgent: dict[str, int],
    reason: str,
) -> None:
    rig = rig_with(db, policy)
    t = rig.clock.now()
    # finetune fills the fleet: above its non-preemptible limit (priority), borrowing the cohort's quota (kueue)
    fillers = [rig.submit(f"f{i}", "finetune", "eli", 8, grace=30) for i in range(4)]
    rig.step()
    assert [rig.state(f) for f in fillers] == ["running"] * 4
    rig.submit("d", "detection", "dana", 8, outcome=Outcome(duration=600), **urgent)
    rig.step(t + 100)
    victims = [f for f in fillers if rig.state(f) == "preempting"]
    assert len(victims) == 1
    rig.step(t + 131)  # the victim exits at SIGTERM; the preemptor starts on its GPUs
    rig.step(t + 132)
    assert rig.state(victims[0]) == "pending"
    assert rig.state("d") == "running"
    (run,) = rig.runs(victims[0])
    assert (run.preempt_reason, run.preemptor) == (reason, "d")


def test_the_old_priority_scheduler_runs_work_above_the_team_limit_preemptible(db: Engine) -> None:
    rig = rig_with(db, "priority")
    rig.submit("a-within", "detection", "dana", 8)  # detection's allocation share of the 32 GPUs: 8
    rig.submit("b-above", "detection", "dana", 8)
    rig.submit("opp", "pretrain", "ben", 8, contract=ContractClass.OPPORTUNISTIC)
    rig.step()
    classes = {j: rig.runs(j)[0].run_class for j in ("a-within", "b-above", "opp")}
    assert classes == {"a-within": "guaranteed", "b-above": "opportunistic", "opp": "opportunistic"}
