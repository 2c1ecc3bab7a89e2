"""A requeue is a decision: the core tells a running job whose requeue was asked to leave, with its grace clamped
and requeue True; a cancellation asked too wins; and the job's run, once ended, puts it back to pending (no
database)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from allotment.changes.events import next_state
from allotment.changes.records import JobFacts, OpenRun
from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Preempt, PreemptReason
from allotment.core.jobstate import JobState
from allotment.core.model import Account, Allocation, Budget, Job, Preemption, Run, RunClass, Snapshot
from allotment.core.policy import Policy
from allotment.policies.fifo import FifoBackfill
from allotment.policies.slurm import SlurmMultifactor
from tests.changes.support import POLICY, SNAP, T0

RUNNING = Job(
    "j1",
    "lab",
    "ann",
    2,
    grace=3600,
    requeue=False,  # its spec says "not after a preemption": an explicit requeue request still requeues it
    run=Run((Allocation("n1", (0, 1)),), T0 - 600, RunClass.GUARANTEED, T0 + 3000),
    requeue_requested=True,
)


LEAVING = RUNNING.run
assert LEAVING is not None
DRAIN = Preemption(T0 - 10, T0 + 50, "drain")


def _snap(*jobs: Job) -> Snapshot:
    return replace(SNAP, budgets=(Budget("lab", None, 10**12),), accounts={"lab": Account(10**12)}, jobs=jobs)


@pytest.mark.parametrize(
    "policy", [AllotmentPolicy(), FifoBackfill(), SlurmMultifactor()], ids=["allotment", "fifo", "slurm"]
)
def test_a_requeued_running_job_is_preempted_with_its_grace_clamped_and_requeued(policy: Policy) -> None:
    d = policy.decide(_snap(RUNNING), T0)
    assert [p for p in d.preempts if p.job_id == "j1"] == [
        Preempt("j1", PreemptReason.REQUEUED, POLICY.max_grace, True)
    ]


CASES = [
    pytest.param(replace(RUNNING, cancel_requested=True), [PreemptReason.CANCELLED], id="cancellation-wins"),
    pytest.param(replace(RUNNING, requeue_requested=False), [], id="nothing-asked-nothing-done"),
    pytest.param(
        replace(RUNNING, run=Run(LEAVING.placement, LEAVING.started_at, LEAVING.run_class, LEAVING.slice_end, DRAIN)),
        [],
        id="already-leaving-is-left-alone",
    ),
]


@pytest.mark.parametrize(("job", "reasons"), CASES)
def test_what_a_requeue_request_does_beside_other_requests(job: Job, reasons: list[PreemptReason]) -> None:
    assert [p.reason for p in AllotmentPolicy().decide(_snap(job), T0).preempts] == reasons


def test_the_run_that_ends_puts_the_job_back_to_pending() -> None:
    facts = JobFacts("j1", JobState.PREEMPTING, "lab", "ann", "batch", 60, 1, False, False)
    run = OpenRun("j1-0", "j1", 0, "lab", T0 - 600, RunClass.GUARANTEED, 2_000_000, 1000, T0 - 600, T0, True,
                  PreemptReason.REQUEUED.value, True)  # fmt: skip
    assert next_state(facts, run, 143, "") == (JobState.PENDING, "requeued on request (scontrol requeue)")
    cancelled = replace(facts, cancel_requested=True)
    assert next_state(cancelled, run, 143, "")[0] is JobState.CANCELLED
