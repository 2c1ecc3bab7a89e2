"""event_changes, next_state and end_run: what executor events mean, as tables of cases (no database)."""

from __future__ import annotations

import pytest

from allotment.changes.events import event_changes, next_state, transition
from allotment.changes.records import JobFacts, OpenRun
from allotment.core.jobstate import JobState
from allotment.ledger.entries import EntryKind
from allotment.ports.executor import EventKind, ExecutorEvent
from tests.changes.support import H100, PERIOD, T0, job, run

CASES: list[tuple[str, JobFacts, OpenRun, int | None, str, JobState, str]] = [
    ("exit 0", job(), run(), 0, "", JobState.COMPLETED, "exited 0"),
    ("exit 3", job(), run(), 3, "oom", JobState.FAILED, "exited with code 3 (oom)"),
    ("lost, requeues", job(), run(), None, "node lost", JobState.PENDING, "requeued: its node was lost"),
    ("lost, no requeue", job(requeue=False), run(), None, "node lost", JobState.LOST, "its node was lost"),
    ("preempted", job(), run(preempt_reason="fair-share"), None, "", JobState.PENDING, "requeued after fair-share"),
    (
        "preempted, run says no requeue",
        job(),
        run(preempt_reason="session-end", requeue=False),
        None,
        "",
        JobState.COMPLETED,
        "ended: session-end",
    ),
    (
        "max runtime",
        job(),
        run(preempt_reason="max-runtime", requeue=False),
        None,
        "",
        JobState.FAILED,
        "reached its maximum runtime",
    ),
    (
        "cancelled",
        job(cancel_requested=True),
        run(preempt_reason="cancelled", requeue=False),
        0,
        "",
        JobState.CANCELLED,
        "cancelled by its owner",
    ),
    (
        "cancel asked mid-preemption",
        job(cancel_requested=True),
        run(preempt_reason="drain"),
        0,
        "",
        JobState.CANCELLED,
        "cancelled by its owner",
    ),
]


@pytest.mark.parametrize(
    ("name", "facts", "open_run", "code", "detail", "state", "why"), CASES, ids=[c[0] for c in CASES]
)
def test_next_state(
    name: str, facts: JobFacts, open_run: OpenRun, code: int | None, detail: str, state: JobState, why: str
) -> None:
    assert next_state(facts, open_run, code, detail) == (state, why)


def test_a_final_state_is_never_left() -> None:
    with pytest.raises(ValueError, match="cannot become"):
        transition(job(state=JobState.COMPLETED), JobState.PENDING, T0, "again")


def test_an_exit_charges_the_run_to_its_end_and_moves_its_job_on() -> None:
    ev = ExecutorEvent("j1", 0, EventKind.EXITED, T0 + 1800, 0)
    c = event_changes([ev], {("j1", 0): run()}, {"j1": job()}, {}, T0 + 2000, PERIOD)
    assert [(e.run_id, e.at, e.exit_code) for e in c.ended] == [("j1.0", T0 + 1800, 0)]
    assert [(e.kind, e.amount, e.key) for e in c.entries] == [
        (EntryKind.CHARGE, -H100 // 2, f"charge:j1.0:{T0 + 1800}")
    ]
    assert c.meters["j1.0"].charged_until == T0 + 1800
    assert [(t.to_state, t.at) for t in c.transitions] == [(JobState.COMPLETED, T0 + 1800)]
    assert c.reasons_gone == ["j1"]


def test_a_lost_run_is_refunded_everything_it_was_charged() -> None:
    ev = ExecutorEvent("j1", 0, EventKind.LOST, T0 + 3600)
    c = event_changes(
        [ev], {("j1", 0): run(charged_until=T0 + 1800)}, {"j1": job()}, {"j1.0": H100 // 2}, T0 + 3600, PERIOD
    )
    refunds = [(e.kind, e.budget, e.amount) for e in c.entries if e.kind is not EntryKind.CHARGE or e.budget != "lab"]
    assert refunds == [(EntryKind.REFUND, "lab", H100), (EntryKind.CHARGE, "infrastructure", -H100)]


def test_an_event_time_is_clamped_to_the_run_and_to_now() -> None:
    late = ExecutorEvent("j1", 0, EventKind.EXITED, T0 + 9999, 0)
    early = ExecutorEvent("j2", 0, EventKind.EXITED, T0 - 50, 0)
    runs = {("j1", 0): run(), ("j2", 0): run("j2")}
    c = event_changes([late, early], runs, {"j1": job(), "j2": job("j2")}, {}, T0 + 100, PERIOD)
    assert [e.at for e in c.ended] == [T0 + 100, T0]


def test_started_confirms_once_attach_and_detach_mark_idleness_and_closed_runs_are_ignored() -> None:
    events = [
        ExecutorEvent("j1", 0, EventKind.STARTED, T0 + 5),
        ExecutorEvent("j1", 0, EventKind.STARTED, T0 + 6),
        ExecutorEvent("j1", 0, EventKind.DETACHED, T0 + 7),
        ExecutorEvent("j1", 0, EventKind.ATTACHED, T0 + 8),
        ExecutorEvent("j1", 0, EventKind.EXITED, T0 + 9, 0),
        ExecutorEvent("j1", 0, EventKind.EXITED, T0 + 10, 1),  # a repeat: the run is closed
        ExecutorEvent("gone", 3, EventKind.EXITED, T0 + 10, 1),  # no open run
    ]
    c = event_changes(events, {("j1", 0): run()}, {"j1": job()}, {}, T0 + 20, PERIOD)
    assert [(t.confirmed_at, t.idle_since, t.clear_idle) for t in c.touched] == [
        (T0 + 5, None, False),
        (None, T0 + 7, False),
        (None, None, True),
    ]
    assert len(c.ended) == 1 and len(c.transitions) == 1


def test_a_confirmed_run_is_not_confirmed_again() -> None:
    c = event_changes(
        [ExecutorEvent("j1", 0, EventKind.STARTED, T0)], {("j1", 0): run(confirmed=True)}, {}, {}, T0, PERIOD
    )
    assert c.touched == []


def test_a_checkpoint_report_records_when_and_the_interval_since_the_last() -> None:
    """Rule `least-lost-work`: each later checkpoint is recorded with the seconds since the one before (the first:
    since the run started); a report no later than the last one, or of a closed run, changes nothing."""
    events = [
        ExecutorEvent("j1", 0, EventKind.CHECKPOINTED, T0 + 600),
        ExecutorEvent("j1", 0, EventKind.EXITED, T0 + 9),
    ]
    first = event_changes(events[:1], {("j1", 0): run()}, {"j1": job()}, {}, T0 + 700, PERIOD)
    assert [(t.checkpoint_at, t.checkpoint_every) for t in first.touched] == [(T0 + 600, 600)]
    later = event_changes(
        [ExecutorEvent("j1", 0, EventKind.CHECKPOINTED, T0 + 1500)],
        {("j1", 0): run()._replace(checkpoint_at=T0 + 600)},
        {"j1": job()},
        {},
        T0 + 1600,
        PERIOD,
    )
    assert [(t.checkpoint_at, t.checkpoint_every) for t in later.touched] == [(T0 + 1500, 900)]
    stale = event_changes(
        [ExecutorEvent("j1", 0, EventKind.CHECKPOINTED, T0 + 600)],
        {("j1", 0): run()._replace(checkpoint_at=T0 + 600)},
        {"j1": job()},
        {},
        T0 + 1600,
        PERIOD,
    )
    assert stale.touched == []
