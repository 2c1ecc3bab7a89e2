"""decision_changes and cancelled_pending: what each decision means, as a table of cases (no database)."""

from __future__ import annotations

from allotment.changes.decisions import cancelled_pending, decision_changes
from allotment.changes.records import LaunchIntent, RunSignalled, TerminateIntent
from allotment.core.decisions import Decisions, Lapse, Preempt, PreemptReason, Renew, Start
from allotment.core.jobstate import JobState
from allotment.core.model import Allocation, RunClass
from allotment.ledger.entries import EntryKind
from tests.changes.support import B200, H100, PERIOD, RULES, SNAP, T0, job, run


def test_a_start_opens_a_metered_run_grants_its_slice_and_records_a_launch() -> None:
    placement = (Allocation("n1", (0, 1)), Allocation("n2", (0,)))
    d = Decisions(starts=(Start("j1", placement, RunClass.GUARANTEED, T0 + 3600, "fair-share"),))
    facts = {"j1": job(state=JobState.PENDING, attempt=2, grace=9999)}
    c = decision_changes(SNAP, d, T0, RULES, {}, facts, {}, PERIOD)
    (opened,) = c.opened
    assert (opened.run_id, opened.attempt, opened.rate, opened.price) == ("j1.2", 2, 2 * H100 + B200, 1000)
    assert [(s.kind, s.end) for s in c.slices] == [("grant", T0 + 3600)]
    (t,) = c.transitions
    assert (t.from_state, t.to_state, t.attempt) == (JobState.PENDING, JobState.RUNNING, 3)
    assert t.why == "started (fair-share) as guaranteed on n1, n2, slice until 1767229200"
    (intent,) = c.intents
    assert isinstance(intent, LaunchIntent)
    assert (intent.spec.attempt, intent.spec.grace, intent.spec.command) == (2, 600, ("train",))  # grace clamped
    assert c.entries == [] and c.reservations == ()


def test_an_opportunistic_start_is_priced_by_its_class() -> None:
    d = Decisions(starts=(Start("j1", (Allocation("n1", (0,)),), RunClass.OPPORTUNISTIC, None, "backfill"),))
    c = decision_changes(SNAP, d, T0, RULES, {}, {"j1": job(state=JobState.PENDING)}, {}, PERIOD)
    assert c.opened[0].price == 400 and c.slices == []


def test_a_preemption_signals_the_run_and_records_a_terminate_with_its_grace() -> None:
    d = Decisions(preempts=(Preempt("j1", PreemptReason.FAIR_SHARE, 120, True, "j9"),))
    c = decision_changes(SNAP, d, T0 + 10, RULES, {"j1": run()}, {"j1": job()}, {}, PERIOD)
    assert c.signalled == [RunSignalled("j1.0", T0 + 10, T0 + 130, "fair-share", "j9", True)]
    assert c.intents == [TerminateIntent("j1", 0, "j1.0", 120)]
    assert [(t.to_state, t.why) for t in c.transitions] == [
        (JobState.PREEMPTING, "preempted (fair-share) for j9, grace 120s")
    ]
    assert c.ended == [] and c.entries == []


def test_a_cancellation_is_applied_like_every_preemption_and_ends_as_cancelled() -> None:
    d = Decisions(preempts=(Preempt("j1", PreemptReason.CANCELLED, 60, False),))
    c = decision_changes(SNAP, d, T0, RULES, {"j1": run()}, {"j1": job(cancel_requested=True)}, {}, PERIOD)
    assert c.signalled[0].reason == "cancelled" and c.signalled[0].requeue is False
    assert c.intents == [TerminateIntent("j1", 0, "j1.0", 60)]
    assert c.transitions[0].to_state is JobState.PREEMPTING


def test_a_run_already_told_to_leave_keeps_its_first_deadline() -> None:
    d = Decisions(preempts=(Preempt("j1", PreemptReason.DRAIN, 60, True),))
    c = decision_changes(SNAP, d, T0, RULES, {"j1": run(signalled=True)}, {"j1": job()}, {}, PERIOD)
    assert c.signalled == [] and c.intents == [] and c.transitions == []


def test_a_lost_node_ends_the_run_at_once_charged_refunded_and_requeued() -> None:
    d = Decisions(preempts=(Preempt("j1", PreemptReason.NODE_DOWN, 0, True),))
    c = decision_changes(SNAP, d, T0 + 3600, RULES, {"j1": run()}, {"j1": job()}, {"j1.0": 0}, PERIOD)
    assert [e.run_id for e in c.ended] == ["j1.0"]
    kinds = [(e.kind, e.budget, e.amount) for e in c.entries]
    assert kinds == [
        (EntryKind.CHARGE, "lab", -H100),
        (EntryKind.REFUND, "lab", H100),
        (EntryKind.CHARGE, "infrastructure", -H100),
    ]
    assert [(t.to_state, t.why) for t in c.transitions] == [(JobState.PENDING, "requeued after node-down")]
    assert c.charged == H100  # the infrastructure account's charge is not the budgets'


def test_a_renewal_extends_the_slice_and_a_lapse_charges_then_reprices() -> None:
    d = Decisions(renews=(Renew("j1", T0 + 7200),), lapses=(Lapse("j2", "unfunded"),))
    runs = {"j1": run(), "j2": run("j2")}
    c = decision_changes(SNAP, d, T0 + 1800, RULES, runs, {}, {}, PERIOD)
    assert [(t.run_id, t.slice_end) for t in c.touched] == [("j1.0", T0 + 7200)]
    assert [(s.kind, s.start, s.end) for s in c.slices] == [("renew", T0 + 1800, T0 + 7200)]
    assert [(e.run_id, e.amount) for e in c.entries] == [("j2.0", -H100 // 2)]
    meter = c.meters["j2.0"]
    assert (meter.price, meter.price_since, meter.charged_until) == (400, T0 + 1800, T0 + 1800)
    assert c.reclassed == {"j2.0": RunClass.OPPORTUNISTIC}


def test_a_lapse_of_a_run_that_is_not_guaranteed_changes_nothing() -> None:
    d = Decisions(lapses=(Lapse("j1", "unfunded"),))
    c = decision_changes(SNAP, d, T0 + 1800, RULES, {"j1": run(run_class=RunClass.OPPORTUNISTIC)}, {}, {}, PERIOD)
    assert c.entries == [] and c.meters == {} and c.reclassed == {}


def test_pending_jobs_whose_cancellation_was_asked_end_as_cancelled() -> None:
    asked = job("j1", JobState.PENDING, cancel_requested=True)
    not_asked = job("j2", JobState.PENDING)
    c = cancelled_pending([asked, not_asked], T0)
    assert [(t.job_id, t.to_state, t.why) for t in c.transitions] == [
        ("j1", JobState.CANCELLED, "cancelled by its owner")
    ]
    assert c.reasons_gone == ["j1"]
