"""Cancellation and requeue as decisions: a running job whose owner asked to cancel or requeue it is told to leave.

Owns: the rule that turns `Job.cancel_requested` on a running job into a Preempt with reason `cancelled` and requeue
False, and `Job.requeue_requested` (scontrol requeue) into a Preempt with reason `requeue-requested` and requeue True
(cancellation wins when both were asked), each with the owner's grace clamped by the rule every preemption uses
(core/capacity.grace_of, through Outcome.preempt and Indices.grace). The allotment cycle (core/cycle.py) and the
baseline policies (policies/common.py) both call `cancellations`.

A pending job whose cancellation was asked is not the core's business: it holds nothing and there is nothing to
decide, so the store's snapshot leaves it out and the change-set rules end it (allotment.changes.decisions,
decision 46).

Must not: read a clock, touch I/O, or preempt a run that was already told to leave (its first deadline stands and
the job still ends as cancelled when it exits; a requeue asked of a leaving run changes nothing).
"""

from __future__ import annotations

from allotment.core.capacity import Capacity
from allotment.core.decisions import PreemptReason
from allotment.core.indices import Indices
from allotment.core.outcome import Outcome


def cancellations(ix: Indices, cap: Capacity, out: Outcome) -> None:
    """Reads the snapshot's running jobs and their cancellation and requeue requests; writes preemptions (to `out`,
    and their occupants' leave times to `cap`)."""
    for job in ix.snap.jobs:
        if job.run is None or job.run.preemption is not None:
            continue
        if job.cancel_requested:
            out.preempt(ix, cap, job, PreemptReason.CANCELLED, None, False)
        elif job.requeue_requested:
            out.preempt(ix, cap, job, PreemptReason.REQUEUED, None, True)
