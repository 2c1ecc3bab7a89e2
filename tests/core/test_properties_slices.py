"""Promise 1: a job inside its run slice is never preempted by a scheduling decision; only its owner's own limits
(maximum runtime, an idle session), a node failure or an administrator's forced drain end it early, and the hardware
and forced cases refund the owner."""

from __future__ import annotations

from hypothesis import given

from allotment.core.decisions import REFUNDED_REASONS, Decisions, PreemptReason
from allotment.core.model import JobKind, NodeState, Snapshot
from tests.core.strategies import CALM, DRIVEN, PROPERTY, Case, CheckedDriver, cases, decide, node_map

EARLY_END_REASONS = frozenset(
    {PreemptReason.NODE_DOWN, PreemptReason.FORCED, PreemptReason.MAX_RUNTIME, PreemptReason.IDLE_SESSION}
)


def check_no_preemption_in_slice(snap: Snapshot, now: int, d: Decisions) -> None:
    jobs = {j.id: j for j in snap.jobs}
    nodes = node_map(snap)
    ids = [p.job_id for p in d.preempts]
    assert len(ids) == len(set(ids)), f"a job preempted twice in one cycle: {ids}"
    for p in d.preempts:
        job = jobs[p.job_id]
        run = job.run
        assert run is not None, f"{p.job_id} is not running but was preempted"
        assert run.preemption is None, f"{p.job_id} was already leaving but was preempted again"
        assert p.refund == (p.reason in REFUNDED_REASONS)
        states = [nodes.get(a.node) for a in run.placement]
        if p.reason is PreemptReason.NODE_DOWN:
            assert any(n is None or n.state is NodeState.DOWN for n in states), f"{p.job_id}: no node is down"
        if p.reason is PreemptReason.FORCED:
            assert any(n is not None and n.state is NodeState.DRAINING and n.forced for n in states)
        if p.reason is PreemptReason.MAX_RUNTIME:
            assert job.max_runtime is not None and now - run.started_at >= job.max_runtime
        if p.reason is PreemptReason.IDLE_SESSION:
            assert job.kind is JobKind.SESSION and run.idle_since is not None
            assert now - run.idle_since >= snap.policy.session_idle_timeout
        if run.in_slice(now):
            assert p.reason in EARLY_END_REASONS, f"{p.job_id} preempted inside its slice for {p.reason}"


@PROPERTY
@given(cases())
def test_no_decision_preempts_a_job_inside_its_slice(case: Case) -> None:
    check_no_preemption_in_slice(case.snapshot, case.now, decide(case))


@DRIVEN
@given(cases(CALM))
def test_no_slice_is_cut_short_over_many_rounds(case: Case) -> None:
    drv = CheckedDriver(case.snapshot, case.durations, case.now)
    drv.hooks.append(check_no_preemption_in_slice)
    drv.run_until(case.now + 6 * 3600, every=300)
