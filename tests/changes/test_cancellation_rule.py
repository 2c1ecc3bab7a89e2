"""Cancellation is a decision: the core tells a cancelled running job to leave (no database)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Preempt, PreemptReason
from allotment.core.model import Account, Allocation, Budget, Job, Preemption, Run, RunClass, Snapshot
from allotment.core.policy import Policy
from allotment.policies.fifo import FifoBackfill
from tests.changes.support import POLICY, SNAP, T0

RUNNING = Job(
    "j1",
    "lab",
    "ann",
    2,
    grace=3600,
    run=Run((Allocation("n1", (0, 1)),), T0 - 600, RunClass.GUARANTEED, T0 + 3000),
    cancel_requested=True,
)


def _snap(*jobs: Job) -> Snapshot:
    return replace(SNAP, budgets=(Budget("lab", None, 10**12),), accounts={"lab": Account(10**12)}, jobs=jobs)


@pytest.mark.parametrize("policy", [AllotmentPolicy(), FifoBackfill()], ids=["allotment", "fifo"])
def test_a_cancelled_running_job_is_preempted_with_its_grace_clamped_and_not_requeued(policy: Policy) -> None:
    d = policy.decide(_snap(RUNNING), T0)
    assert [p for p in d.preempts if p.job_id == "j1"] == [
        Preempt("j1", PreemptReason.CANCELLED, POLICY.max_grace, False)
    ]


def test_a_job_already_leaving_is_not_preempted_again() -> None:
    assert RUNNING.run is not None
    leaving = replace(RUNNING, run=replace(RUNNING.run, preemption=Preemption(T0 - 10, T0 + 50, "drain")))
    assert AllotmentPolicy().decide(_snap(leaving), T0).preempts == ()


def test_a_job_not_cancelled_stays() -> None:
    assert AllotmentPolicy().decide(_snap(replace(RUNNING, cancel_requested=False)), T0).preempts == ()
