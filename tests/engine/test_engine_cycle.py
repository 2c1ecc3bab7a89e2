"""The engine cycle end to end on a real store: submissions become runs, exits close them, charges are exact."""

from __future__ import annotations

from sqlalchemy import Engine, select, update

from allotment.core.model import ContractClass
from allotment.executors.simulated import Outcome
from allotment.store.snapshot import SnapshotCache, load_snapshot
from allotment.store.tables import IntentRow, PendingReasonRow, RunRow
from tests.engine.rig import Rig


def test_a_submitted_job_runs_completes_and_is_charged_exactly(db: Engine) -> None:
    rig = Rig(db)
    t = rig.clock.now()
    rig.submit("a", gpus=8, outcome=Outcome(duration=1000))
    rig.step()
    assert rig.state("a") == "running"
    (run,) = rig.runs("a")
    assert run.started_at == t and run.slice_end == t + 3600 and len(run.placement[0]["gpus"]) == 8
    rig.step(t + 500)
    rig.step(t + 1500)
    assert rig.state("a") == "completed"
    (run,) = rig.runs("a")
    assert (run.ended_at, run.exit_code) == (t + 1000, 0)
    assert rig.history("a") == [(None, "pending"), ("pending", "running"), ("running", "completed")]
    # 8 H100 × 1000 s at full price = 8 × 1000/3600 credits, charged once, to the microunit
    assert rig.charged("pretrain") == rig.held_cost("a") == 2_222_222


def test_a_failing_job_is_failed_with_its_exit_code(db: Engine) -> None:
    rig = Rig(db)
    rig.submit("bad", outcome=Outcome(duration=10, exit_code=3))
    rig.step()
    rig.step(rig.clock.now() + 20)
    assert rig.state("bad") == "failed"
    assert rig.runs("bad")[0].exit_code == 3


def _fleet_full_of_opportunistic_work(rig: Rig) -> None:
    """Four 8-GPU opportunistic jobs of finetune (grace 30 s) fill the small example's four nodes."""
    for i in range(4):
        rig.submit(f"o{i}", "finetune", "eli", 8, contract=ContractClass.OPPORTUNISTIC, grace=30)
    rig.step()
    assert [rig.state(f"o{i}") for i in range(4)] == ["running"] * 4


def test_opportunistic_work_is_preempted_with_notice_requeued_and_charged_at_its_price(db: Engine) -> None:
    rig = Rig(db)
    t = rig.clock.now()
    _fleet_full_of_opportunistic_work(rig)
    rig.submit("g", "pretrain", "ben", 8, outcome=Outcome(duration=600))
    rig.step(t + 100)
    victims = [f"o{i}" for i in range(4) if rig.state(f"o{i}") == "preempting"]
    assert len(victims) == 1
    rig.step(t + 130)  # the victim exits at its SIGTERM (the simulated job leaves at once)
    rig.step(t + 131)
    assert rig.state(victims[0]) == "pending"
    assert rig.state("g") == "running"
    (run,) = rig.runs(victims[0])
    assert run.preempt_reason == "for-guaranteed" and run.preemptor == "g" and run.price == 400
    assert rig.history(victims[0])[-3:] == [
        ("pending", "running"),
        ("running", "preempting"),
        ("preempting", "pending"),
    ]


def test_cancellation_of_pending_and_running_jobs(db: Engine) -> None:
    rig = Rig(db)
    rig.submit("run", outcome=Outcome(duration=None))
    rig.step()
    rig.submit("wait", gpus=8, clusters=("nowhere",))
    rig.cancel("run")
    rig.cancel("wait")
    rig.step(rig.clock.now() + 5)
    assert rig.state("wait") == "cancelled"
    assert rig.state("run") == "preempting"
    rig.step(rig.clock.now() + 5)
    assert rig.state("run") == "cancelled"


def test_a_cancellation_is_a_preemption_with_the_clamped_grace_and_is_charged_to_its_end(db: Engine) -> None:
    rig = Rig(db)
    rig.submit("run", grace=100_000, outcome=Outcome(duration=None, sigterm_exit_after=None))
    rig.step()
    rig.cancel("run")
    t = rig.clock.now() + 5
    rig.step(t)
    (run,) = rig.runs("run")
    assert (run.preempt_reason, run.requeue, run.kill_at) == ("cancelled", False, t + rig.policy.max_grace)
    with rig.sessions() as s:
        grace = s.scalars(select(IntentRow.payload).where(IntentRow.kind == "terminate")).one()["grace"]
    assert grace == rig.policy.max_grace
    rig.step(t + rig.policy.max_grace + 5)
    assert rig.state("run") == "cancelled"
    assert rig.charged("pretrain") == rig.held_cost("run")


def test_a_lost_node_ends_the_run_refunds_the_owner_and_requeues(db: Engine) -> None:
    rig = Rig(db)
    t = rig.clock.now()
    rig.submit("x", outcome=Outcome(duration=None))
    rig.step()
    node = rig.runs("x")[0].placement[0]["node"]
    rig.executor.fail_node(node, t + 600)
    rig.step(t + 700)
    assert rig.state("x") in ("pending", "running")  # requeued, and possibly already restarted elsewhere
    first = rig.runs("x")[0]
    assert first.ended_at == t + 600 and first.end_reason == "node lost"
    assert rig.charged("pretrain") == 0  # refunded; the new run has not been charged yet
    assert rig.charged("infrastructure") == 8 * 600 * 1_000_000 // 3600


def test_every_intent_is_delivered_once_and_reasons_are_recorded(db: Engine) -> None:
    rig = Rig(db)
    for i in range(6):
        rig.submit(f"j{i}", gpus=8)
    rig.step()
    with rig.sessions() as s:
        intents = list(s.scalars(select(IntentRow)))
        reasons = {r.job_id: r for r in s.scalars(select(PendingReasonRow))}
    assert len(intents) == 3 and all(i.delivered_at is not None for i in intents)  # pretrain max_gpus = 24
    assert set(reasons) == {"j3", "j4", "j5"}
    assert reasons["j3"].blocker == "limit" and "24" in reasons["j3"].message


def test_the_snapshot_reuses_an_unchanged_run_and_rebuilds_a_changed_one(db: Engine) -> None:
    rig = Rig(db)
    rig.submit("a", gpus=8)
    rig.submit("b", gpus=8)
    rig.step()
    keep = SnapshotCache()
    with rig.sessions.begin() as s:
        first = {j.id: j for j in load_snapshot(s, rig.clock.now(), rig.policy, rig.rates, "", keep).jobs}
    assert first["a"].run is not None and first["a"].run.preemption is None
    t = rig.clock.now() + 10
    with rig.sessions.begin() as s:
        s.execute(update(RunRow).where(RunRow.job_id == "a").values(signalled_at=t, kill_at=t + 30, preempt_reason="x"))
    with rig.sessions.begin() as s:
        second = {j.id: j for j in load_snapshot(s, t, rig.policy, rig.rates, "", keep).jobs}
    run = second["a"].run
    assert (
        run is not None
        and run.preemption is not None
        and (run.preemption.signalled_at, run.preemption.kill_at) == (t, t + 30)
    )
    assert second["b"] is first["b"]  # its run's columns did not change: the job built last cycle is reused


def test_a_cycles_intents_are_recorded_in_the_order_it_acted(db: Engine) -> None:
    rig = Rig(db)
    t = rig.clock.now()
    _fleet_full_of_opportunistic_work(rig)
    rig.cancel("o3")
    rig.submit("g", "pretrain", "ben", 8, replicas=2)  # two nodes: the one o3 leaves and one more
    rig.step(t + 100)
    with rig.sessions() as s:
        rows = list(s.scalars(select(IntentRow).where(IntentRow.created_at == t + 100).order_by(IntentRow.id)))
    victim = next(f"o{i}" for i in range(3) if rig.state(f"o{i}") == "preempting")
    # the cancellation is acted on before the cycle decides; the preemption comes from its decisions
    assert [(r.kind, r.job_id) for r in rows] == [("terminate", "o3"), ("terminate", victim)]
    assert rig.runs(victim)[-1].preemptor == "g"
