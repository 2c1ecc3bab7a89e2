"""The cycle's named steps (changes/steps.py) and intent encoding, as tables of cases (no database)."""

from __future__ import annotations

from dataclasses import replace

from allotment.changes.intents import decode, encode
from allotment.changes.records import ChangeSet, LaunchIntent, RunEnded, TerminateIntent
from allotment.changes.steps import (
    ESTIMATE_TOLERANCE,
    ReasonValues,
    decay_usage,
    held_rates,
    periodic_charges,
    reason_changes,
    rollover_charges,
)
from allotment.core.decisions import Blocker, Decisions, Start, WaitReason
from allotment.core.model import Allocation, RunClass
from allotment.ledger.periods import Period
from allotment.ledger.usage import usage_after
from allotment.ports.executor import LaunchSpec
from allotment.ports.store import IntentKind
from tests.changes.support import H100, PERIOD, T0, run


def test_periodic_charges_charge_only_runs_not_charged_for_charge_every() -> None:
    runs = [run("due", charged_until=T0), run("fresh", charged_until=T0 + 3500), run("ended")]
    so_far = ChangeSet(ended=[RunEnded("ended.0", T0 + 10, 0, "")])
    c = periodic_charges(runs, so_far, T0 + 3600, PERIOD, 300)
    assert [(e.run_id, e.amount) for e in c.entries] == [("due.0", -H100)]
    assert set(c.meters) == {"due.0"}


def test_periodic_charges_start_from_the_meter_this_cycle_left() -> None:
    r = run(charged_until=T0)
    so_far = ChangeSet(meters={"j1.0": replace(r.meter, charged_until=T0 + 3500)})
    c = periodic_charges([r], so_far, T0 + 3600, PERIOD, 300)
    assert c.entries == []  # charged at T0 + 3500 by an earlier change: not due


def test_rollover_charges_every_open_run_to_the_boundary_in_the_old_period() -> None:
    old = Period("2025-12-01", T0 - 31 * 86400, T0)
    c = rollover_charges([run(started_at=T0 - 7200, price_since=T0 - 7200, charged_until=T0 - 3600)], old)
    assert [(e.amount, e.period_id, e.at) for e in c.entries] == [(-H100, "2025-12-01", T0)]


def test_usage_decays_adds_what_was_held_and_starts_new_budgets_at_zero() -> None:
    usage = {"a": (5.0, T0), "b": (1.0, T0 + 100)}
    c = decay_usage(usage, {"a": H100, "new": H100}, T0, T0 + 100, 3600)
    got = {u.budget: (round(u.usage, 9), u.as_of, u.new) for u in c.usage}
    assert got == {
        "a": (round(usage_after(5.0, T0, T0 + 100, 3600, H100), 9), T0 + 100, False),
        "new": (0.0, T0 + 100, True),
    }
    assert c.state == {"usage_at": T0 + 100}
    assert held_rates([run("x"), run("y"), run("z", budget="other")]) == {"lab": 2 * H100, "other": H100}


def test_usage_is_left_alone_when_no_time_passed() -> None:
    assert decay_usage({"a": (5.0, T0)}, {}, T0, T0, 3600).usage == []


def test_reasons_are_written_only_when_they_changed() -> None:
    memo: dict[str, ReasonValues] = {}
    r1 = WaitReason(Blocker.CAPACITY, "no room", 8, 2, T0 + 1000, ())
    first = reason_changes(Decisions(pending={"a": r1, "b": r1}), T0, memo)
    assert [r.job_id for r in first.reasons] == ["a", "b"]
    drift = WaitReason(Blocker.CAPACITY, "no room", 8, 2, T0 + 1000 + ESTIMATE_TOLERANCE, ())
    assert reason_changes(Decisions(pending={"a": drift, "b": drift}), T0 + 5, memo).reasons == []
    moved = WaitReason(Blocker.CAPACITY, "no room", 8, 1, T0 + 1000, ())
    start = Start("b", (Allocation("n1", (0,)),), RunClass.GUARANTEED, None, "fair-share")
    third = reason_changes(Decisions(starts=(start,), pending={"a": moved}), T0 + 10, memo)
    assert [r.job_id for r in third.reasons] == ["a"] and third.reasons_gone == ["b"]
    assert set(memo) == {"a"}


def test_intents_encode_and_decode_in_one_place() -> None:
    spec = LaunchSpec("j1", 2, ("a", "b"), (Allocation("n1", (0, 1)),), "lab", "ann", "batch", 60, None, {"K": "v"})
    kind, job_id, attempt, run_id, payload = encode(LaunchIntent("j1.2", spec))
    assert (kind, job_id, attempt, run_id) == (IntentKind.LAUNCH, "j1", 2, "j1.2")
    assert decode(7, kind.value, job_id, attempt, payload).spec == spec
    kind, job_id, attempt, run_id, payload = encode(TerminateIntent("j1", 2, "j1.2", 45))
    back = decode(8, kind.value, job_id, attempt, payload)
    assert (back.kind, back.grace, back.spec) == (IntentKind.TERMINATE, 45, None)
