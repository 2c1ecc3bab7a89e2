"""Promises 1 and 4 as a capacity window opens (issue 19): the window's budget reclaims its pool from other budgets'
work outside its slice — never from work inside its slice, never its own work, never more victims than its job
needs — and does reclaim it when the GPUs are there to take."""

from __future__ import annotations

from hypothesis import given

from allotment.core.decisions import Blocker, PreemptReason
from allotment.core.model import Job, Run, Snapshot
from tests.core.strategies import PROPERTY, Case, decide
from tests.core.strategies_edges import WINDOW_OWNER, window_openings
from tests.core.test_properties_slices import check_no_preemption_in_slice


def _on_node(snap: Snapshot, node: str) -> list[Job]:
    return [j for j in snap.jobs if j.run is not None and any(a.node == node for a in j.run.placement)]


def _free_and_leaving(snap: Snapshot, node: str) -> int:
    held = sum(
        len(a.gpus) for j in _on_node(snap, node) if j.run is not None for a in j.run.placement if a.node == node
    )
    leaving = sum(
        len(a.gpus)
        for j in _on_node(snap, node)
        if j.run is not None and j.run.preemption is not None
        for a in j.run.placement
        if a.node == node
    )
    return 8 - held + leaving


@PROPERTY
@given(window_openings())
def test_a_window_opening_takes_no_work_inside_its_slice(case: Case) -> None:
    check_no_preemption_in_slice(case.snapshot, case.now, decide(case))


@PROPERTY
@given(window_openings())
def test_a_window_takes_only_other_budgets_work_and_no_more_than_its_job_needs(case: Case) -> None:
    snap, now = case.snapshot, case.now
    d = decide(case)
    jobs = {j.id: j for j in snap.jobs}
    victims = [p for p in d.preempts if p.reason is PreemptReason.WINDOW]
    for p in victims:
        assert jobs[p.job_id].budget != WINDOW_OWNER, f"the window evicted its own budget's {p.job_id}"
        assert p.preemptor == "want"
    if not victims:
        return
    runs = [_run_of(jobs[p.job_id]) for p in victims]
    (node,) = {a.node for r in runs for a in r.placement}
    have = _free_and_leaving(snap, node)
    taken = [r.gpu_count for r in runs]
    need = jobs["want"].total_gpus
    assert have < need, "preempted although free and leaving GPUs already covered the need"
    assert have + sum(taken) >= need, "preempted without letting the window's job start"
    for t in taken:
        assert have + sum(taken) - t < need, f"a victim of {t} GPUs was not needed ({taken}, {have} there)"
    assert not any(r.in_slice(now) for r in runs)


@PROPERTY
@given(window_openings())
def test_a_window_reclaims_its_pool_when_the_gpus_are_there(case: Case) -> None:
    """If one node's free, leaving and other budgets' lapsed or opportunistic GPUs cover the job, and the window
    still has room for it, the job starts, or the window takes that work now, or the job waits only for GPUs
    already being freed for it."""
    snap, now = case.snapshot, case.now
    d = decide(case)
    want = next(j for j in snap.jobs if j.id == "want")
    (window,) = snap.windows
    own = sum(
        j.run.gpu_count for j in snap.jobs if j.budget == WINDOW_OWNER and j.run is not None and not j.run.preemption
    )
    if own + want.total_gpus > window.gpus:
        return
    reach = 0
    for node in snap.nodes:
        takeable = sum(
            j.run.gpu_count
            for j in _on_node(snap, node.name)
            if j.run is not None and j.budget != WINDOW_OWNER and j.run.preemption is None and j.run.slice_end is None
        )
        reach = max(reach, _free_and_leaving(snap, node.name) + takeable)
    if reach < want.total_gpus:
        return
    started = any(s.job_id == "want" for s in d.starts)
    reclaimed = any(p.preemptor == "want" for p in d.preempts)
    waits = "want" in d.pending and d.pending["want"].blocker is Blocker.WAITING_FOR_GRACE
    assert started or reclaimed or waits, f"the window's job waits with {reach} GPUs it could take ({now=})"


def _run_of(job: Job) -> Run:
    assert job.run is not None, f"{job.id} was preempted but is not running"
    return job.run
