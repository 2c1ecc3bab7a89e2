"""The dependency rule of the eligibility gate (changes/eligibility.py) and its syntax (changes/dependency.py): each
kind against each state of the job it names, `,` and `?`, singleton, chains that end in one cycle, and the
snapshot loader keeping waiting jobs out and naming unsatisfiable ones for the cycle to cancel."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from allotment.changes.decisions import never_satisfied
from allotment.changes.dependency import DependencyError, parse
from allotment.changes.eligibility import (
    Candidate,
    DependencyFacts,
    Named,
    Namesake,
    Unsatisfiable,
    array_named,
    gate,
    screen,
)
from allotment.changes.snapshot import ActiveRow, SnapshotCache
from allotment.core.decisions import Blocker, WaitReason
from allotment.core.jobstate import JobState
from allotment.core.model import Job
from tests.changes.support import T0, job, loaded

B = Job("b", "lab", "ann", 8, submitted_at=T0 + 10)

STATES = {  # how the job named stands: (state, ever started)
    "pending": Named(JobState.PENDING, False),
    "requeued": Named(JobState.PENDING, True),
    "running": Named(JobState.RUNNING, True),
    "preempting": Named(JobState.PREEMPTING, True),
    "completed": Named(JobState.COMPLETED, True),
    "failed": Named(JobState.FAILED, True),
    "cancelled-before-start": Named(JobState.CANCELLED, False),
    "lost": Named(JobState.LOST, True),
    "missing": None,
}
# ok: B may be considered; wait: B waits (blocker dependency); never: B is to be cancelled
EXPECTED = {
    "after": ["wait", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "never"],
    "afterany": ["wait", "wait", "wait", "wait", "ok", "ok", "ok", "ok", "never"],
    "afterok": ["wait", "wait", "wait", "wait", "ok", "never", "never", "never", "never"],
    "afternotok": ["wait", "wait", "wait", "wait", "never", "ok", "ok", "ok", "never"],
}
KIND_BY_STATE = [
    pytest.param(kind, state, outcome, id=f"{kind}-{state}-{outcome}")
    for kind, outcomes in EXPECTED.items()
    for state, outcome in zip(STATES, outcomes, strict=True)
]


def facts(**named: Named | None) -> DependencyFacts:
    return DependencyFacts({jid: n for jid, n in named.items() if n is not None})


def outcome(verdict: WaitReason | Unsatisfiable | None) -> str:
    if verdict is None:
        return "ok"
    if isinstance(verdict, Unsatisfiable):
        return "never"
    assert verdict.blocker is Blocker.DEPENDENCY and verdict.needed_gpus == 8
    return "wait"


@pytest.mark.parametrize(("kind", "state", "expected"), KIND_BY_STATE)
def test_each_kind_against_each_state_of_the_job_it_names(kind: str, state: str, expected: str) -> None:
    verdict = gate(B, None, f"{kind}:a", facts(a=STATES[state]))
    assert outcome(verdict) == expected
    if expected == "wait":
        assert isinstance(verdict, WaitReason) and f"waits for its dependency: {kind}:a (a " in verdict.message
    if expected == "never":
        assert isinstance(verdict, Unsatisfiable) and verdict.reason.startswith(f"dependency never satisfied: {kind}:a")


REASONS = [
    pytest.param("afterok:a", facts(a=STATES["running"]), "waits for its dependency: afterok:a (a is running)",
                 id="names-the-part-and-the-state"),
    pytest.param("afterok:a", facts(a=STATES["requeued"]), "afterok:a (a is pending again (requeued))",
                 id="a-requeued-job-is-said-so"),
    pytest.param("afterok:a:c,afterany:d", facts(a=STATES["completed"], c=STATES["running"], d=STATES["pending"]),
                 "waits for its dependency: afterok:c (c is running), afterany:d (d is pending)",
                 id="all-of-lists-every-part-that-holds-it"),
    pytest.param("afterok:a?afterok:c", facts(a=STATES["failed"], c=STATES["running"]),
                 "waits for any one of its dependencies: afterok:c (c is running)", id="any-of-lists-the-open-ones"),
    pytest.param("afterok:a", facts(a=STATES["failed"]), "dependency never satisfied: afterok:a (a failed)",
                 id="never-says-why"),
    pytest.param("afterok:a", facts(), "dependency never satisfied: afterok:a (a does not exist)",
                 id="a-job-that-does-not-exist"),
    pytest.param("afterok:a?afternotok:c", facts(a=STATES["lost"], c=STATES["completed"]),
                 "dependency never satisfied: none of afterok:a (a was lost), afternotok:c (c completed) can be",
                 id="any-of-never-when-every-part-is-never"),
    pytest.param("afterok:a,afterany:c", facts(a=STATES["failed"], c=STATES["running"]),
                 "dependency never satisfied: afterok:a (a failed)", id="all-of-never-when-one-part-is-never"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "known", "message"), REASONS)
def test_the_reason_names_what_holds_the_job(text: str, known: DependencyFacts, message: str) -> None:
    verdict = gate(B, None, text, known)
    assert verdict is not None
    assert message in (verdict.reason if isinstance(verdict, Unsatisfiable) else verdict.message)


C, R, P = JobState.COMPLETED, JobState.RUNNING, JobState.PENDING
ARRAYS = [
    pytest.param([C, C], C, id="every-task-completed"),
    pytest.param([C, R], R, id="a-task-runs"),
    pytest.param([C, P], P, id="a-task-waits"),
    pytest.param([R, P], R, id="running-before-pending"),
    pytest.param([C, JobState.CANCELLED, JobState.FAILED], JobState.FAILED, id="the-worst-end-failed"),
    pytest.param([C, JobState.CANCELLED], JobState.CANCELLED, id="one-cancelled"),
    pytest.param([JobState.LOST, JobState.CANCELLED], JobState.LOST, id="lost-before-cancelled"),
]


@pytest.mark.parametrize(("tasks", "as_one"), ARRAYS)
def test_an_array_named_by_its_id_stands_as_its_tasks_together(tasks: list[JobState], as_one: JobState) -> None:
    named = array_named([Named(t, t is not P) for t in tasks])
    assert named.state is as_one and named.started is any(t is not P for t in tasks)


def test_any_of_is_satisfied_by_one_part_and_all_of_needs_every_part() -> None:
    known = facts(a=STATES["completed"], c=STATES["running"])
    assert gate(B, None, "afterok:a?afterok:c", known) is None
    assert outcome(gate(B, None, "afterok:a,afterok:c", known)) == "wait"
    assert gate(B, None, "afterok:a,afterany:c", facts(a=STATES["completed"], c=STATES["failed"])) is None


def test_a_held_job_waits_for_its_hold_but_an_unsatisfiable_dependency_cancels_it_anyway() -> None:
    held = gate(B, "user", "afterok:a", facts(a=STATES["running"]))
    assert isinstance(held, WaitReason) and held.blocker is Blocker.HELD
    assert isinstance(gate(B, "admin", "afterok:a", facts(a=STATES["failed"])), Unsatisfiable)
    released = gate(B, None, "afterok:a", facts(a=STATES["completed"]))
    assert released is None


def namesake(jid: str, state: JobState, at: int) -> Namesake:
    return Namesake(jid, state, at)


SINGLETONS = [
    pytest.param([], "ok", "", id="alone"),
    pytest.param([namesake("b", JobState.PENDING, T0 + 10)], "ok", "", id="only-itself"),
    pytest.param([namesake("a", JobState.RUNNING, T0 + 50)], "wait", "a of the same name is running",
                 id="another-runs-even-if-submitted-later"),
    pytest.param([namesake("a", JobState.PREEMPTING, T0)], "wait", "a of the same name is preempting",
                 id="another-is-leaving"),
    pytest.param([namesake("a", JobState.PENDING, T0)], "wait", "a of the same name, submitted earlier, is pending",
                 id="an-earlier-one-waits"),
    pytest.param([namesake("c", JobState.PENDING, T0 + 20)], "ok", "", id="a-later-one-waits-behind-it"),
    pytest.param([namesake("a", JobState.PENDING, T0 + 10)], "wait", "a of the same name", id="same-second-by-id"),
    pytest.param([namesake("c", JobState.PENDING, T0 + 10)], "ok", "", id="same-second-later-id"),
]  # fmt: skip


@pytest.mark.parametrize(("others", "expected", "message"), SINGLETONS)
def test_singleton_waits_for_a_running_namesake_or_an_earlier_one(
    others: list[Namesake], expected: str, message: str
) -> None:
    verdict = gate(B, None, "singleton", DependencyFacts({}, {"b": others}))
    assert outcome(verdict) == expected
    if message:
        assert isinstance(verdict, WaitReason) and f"singleton ({message}" in verdict.message


def test_a_chain_ends_in_one_pass_and_asked_cancellations_count_as_done() -> None:
    chain = [
        Candidate(Job("b", "lab", "ann", 8), None, "afterok:a"),
        Candidate(Job("c", "lab", "ann", 8), None, "afterok:b"),
        Candidate(Job("d", "lab", "ann", 8), None, "afternotok:c"),  # c is cancelled: d may run
        Candidate(Job("e", "lab", "ann", 8), None, "afterany:x"),
    ]
    known = facts(a=STATES["failed"], b=STATES["pending"], c=STATES["pending"], x=STATES["pending"])
    out = screen(chain, known)
    assert {j: outcome(v) for j, v in out.items()} == {"b": "never", "c": "never", "e": "wait"}
    assert isinstance(out["c"], Unsatisfiable) and "afterok:b (b was cancelled)" in out["c"].reason
    asked = screen(chain, known, cancelling=["x"])  # x's cancellation was asked: it ends this cycle
    assert "e" not in asked


def test_a_singleton_behind_a_job_cancelled_this_cycle_may_start() -> None:
    known = DependencyFacts({}, {"b": [namesake("a", JobState.PENDING, T0)]})
    assert outcome(screen([Candidate(B, None, "singleton")], known)["b"]) == "wait"
    assert screen([Candidate(B, None, "singleton")], known, cancelling=["a"]) == {}


def test_never_satisfied_cancels_pending_jobs_with_the_reason() -> None:
    pending = job("b", JobState.PENDING)
    changes = never_satisfied(
        {"b": pending, "r": job("r", JobState.RUNNING)},
        {"b": "dependency never satisfied: afterok:a (a failed)", "r": "x"},
        T0,
    )
    assert [(t.job_id, t.to_state, t.why) for t in changes.transitions] == [
        ("b", JobState.CANCELLED, "cancelled: dependency never satisfied: afterok:a (a failed)")
    ]
    assert changes.reasons_gone == ["b"]


JOBS = {jid: Job(jid, "lab", "ann", 8) for jid in ("a", "b", "c", "h", "t_0", "t_1")}


def snapshot(active: Sequence[ActiveRow], known: DependencyFacts, keep: SnapshotCache) -> tuple[str, ...]:
    asked: list[tuple[list[str], list[str]]] = []

    def lookup(named: list[str], singletons: list[str]) -> DependencyFacts:
        asked.append((named, singletons))
        return known

    snap = loaded(active, keep, JOBS, lookup=lookup)
    assert len(asked) <= 1 and all(named == sorted(named) for named, _ in asked)
    return tuple(j.id for j in snap.jobs)


def test_the_loader_keeps_waiting_jobs_out_and_names_the_unsatisfiable() -> None:
    keep = SnapshotCache()
    active: list[ActiveRow] = [
        ("a", "running", False, None, 0, False, None, None),
        ("b", "pending", False, None, 0, False, None, "afterok:a"),
        ("c", "pending", False, None, 0, False, None, "afterok:x"),
        ("h", "pending", False, "user", 0, False, None, "afterany:a"),
    ]
    known = facts(a=STATES["running"], x=STATES["failed"])
    assert snapshot(active, known, keep) == ()  # a has no open run here: only pending jobs are gated
    assert {j: r.blocker for j, r in keep.gated.items()} == {"b": Blocker.DEPENDENCY, "h": Blocker.HELD}
    assert keep.unsatisfiable == {"c": "dependency never satisfied: afterok:x (x failed)"}
    done = facts(a=STATES["completed"], x=STATES["failed"])
    assert snapshot(active[:2], done, keep) == ("b",) and keep.gated == {} and keep.unsatisfiable == {}


def test_an_array_task_waiting_for_its_dependency_takes_no_place_in_its_arrays_limit() -> None:
    keep = SnapshotCache()
    active: list[ActiveRow] = [
        ("t_0", "pending", False, None, 0, False, ("t", 0, 1), "afterok:a"),
        ("t_1", "pending", False, None, 0, False, ("t", 1, 1), None),
    ]
    assert snapshot(active, facts(a=STATES["running"]), keep) == ("t_1",)  # %1: t_1 is the one let through
    assert keep.gated["t_0"].blocker is Blocker.DEPENDENCY


def test_the_loader_asks_the_store_nothing_when_no_job_has_a_dependency() -> None:
    keep = SnapshotCache()
    assert snapshot([("b", "pending", False, "user", 0, False, None, None)], facts(), keep) == ()
    assert snapshot([("b", "pending", False, None, 0, False, None, None)], facts(), keep) == ("b",)


SYNTAX = [
    pytest.param("afterok:j-1", "afterok:j-1", id="one"),
    pytest.param("afterok:j-1:j-2,afterany:j-3", "afterok:j-1:j-2,afterany:j-3", id="several-ids-and-parts"),
    pytest.param("afterok:j-1,afterok:j-2", "afterok:j-1:j-2", id="consecutive-parts-of-a-kind-join"),
    pytest.param(" afternotok:j-1?after:j-2 ", "afternotok:j-1?after:j-2", id="any-of"),
    pytest.param("singleton,afterok:j-1", "afterok:j-1,singleton", id="singleton-last"),
    pytest.param("afterok:j-1:j-1", "afterok:j-1", id="a-repeated-id-once"),
    pytest.param("afterok:j-1:j-2?afterany:j-3", "afterok:j-1?afterok:j-2?afterany:j-3", id="every-id-of-any-of-apart"),
]


@pytest.mark.parametrize(("text", "canonical"), SYNTAX)
def test_sbatch_syntax_is_parsed_to_one_canonical_text(text: str, canonical: str) -> None:
    assert parse(text).text == canonical
    assert parse(canonical).text == canonical


REFUSED = [
    pytest.param("", "is empty", id="empty"),
    pytest.param("afterok", "afterok needs at least one job id", id="no-ids"),
    pytest.param("afterok:", "afterok needs at least one job id", id="empty-ids"),
    pytest.param("aftercorr:j-1", "unknown dependency type 'aftercorr'", id="aftercorr"),
    pytest.param("expand:j-1", "unknown dependency type 'expand'", id="expand"),
    pytest.param("after:j-1+10", "JOB_ID+MINUTES (a delay after the start) is not supported", id="after-plus-time"),
    pytest.param("afterok:j-1,afterok:j-2?afterany:j-3", "not both", id="mixed-separators"),
    pytest.param("afterok:j-1,,afterok:j-2", "empty part", id="empty-part"),
    pytest.param("singleton:j-1", "singleton names no jobs", id="singleton-with-ids"),
    pytest.param("singleton?afterok:j-1", "cannot be an alternative", id="singleton-as-alternative"),
    pytest.param("afterok:j 1", "'j 1' in afterok is not a job id", id="bad-id"),
    pytest.param("afterok:" + ":".join(f"j-{i}" for i in range(101)), "at most 100 jobs", id="too-many-jobs"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_what_is_not_accepted_is_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(DependencyError, match=message.replace("+", r"\+").replace("(", r"\(").replace(")", r"\)")):
        parse(text)
