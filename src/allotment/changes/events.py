"""What executor events mean, and how a run ends: a pure function from events (and the facts loaded for them) to a
ChangeSet.

Owns: a run confirmed, attached or detached; a run that exited or was lost is ended — charged to its end, refunded
when the fleet is at fault (a lost node, a forced drain), and its job moved on (requeued, completed, failed,
cancelled or lost) with the reason recorded. `end_run` is also what a preemption for a lost node does at once
(decisions.py).

Must not: price anything itself (allotment.ledger.charges does), read rows, or talk to an executor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from allotment.changes.records import ChangeSet, JobFacts, OpenRun, RunEnded, RunTouched, Transition
from allotment.core.decisions import REFUNDED_REASONS, PreemptReason
from allotment.core.jobstate import FINAL, JobState
from allotment.core.model import Micro, Seconds
from allotment.ledger.charges import accrue, refund
from allotment.ports.executor import EventKind, ExecutorEvent

NODE_LOST = "node lost"
_FLEET_FAULTS = frozenset(r.value for r in REFUNDED_REASONS)


def next_state(job: JobFacts, run: OpenRun, exit_code: int | None, detail: str) -> tuple[JobState, str]:
    """Where a job goes when its run ends, and why."""
    reason = run.preempt_reason
    fleet_fault = detail == NODE_LOST or reason in _FLEET_FAULTS
    if job.cancel_requested or reason == PreemptReason.CANCELLED.value:
        return JobState.CANCELLED, "cancelled by its owner"
    if reason == PreemptReason.REQUEUED.value:
        return JobState.PENDING, "requeued on request (scontrol requeue)"
    if reason is not None:
        if run.requeue if run.requeue is not None else job.requeue:
            return JobState.PENDING, f"requeued after {reason}"
        if reason == PreemptReason.MAX_RUNTIME.value:
            return JobState.FAILED, "reached its maximum runtime"
        return JobState.COMPLETED, f"ended: {reason}"
    if fleet_fault:
        return (
            (JobState.PENDING, "requeued: its node was lost") if job.requeue else (JobState.LOST, "its node was lost")
        )
    if exit_code == 0:
        return JobState.COMPLETED, "exited 0"
    return JobState.FAILED, f"exited with code {exit_code}" + (f" ({detail})" if detail else "")


def transition(job: JobFacts, to: JobState, at: Seconds, why: str, attempt: int | None = None) -> Transition:
    """A job's move to `to`; a final state is never left."""
    if job.state in FINAL and to != job.state:
        raise ValueError(f"job {job.job_id} is {job.state}; it cannot become {to}")
    return Transition(job.job_id, job.state, to, at, why, attempt)


def end_run(
    changes: ChangeSet,
    job: JobFacts,
    run: OpenRun,
    at: Seconds,
    exit_code: int | None,
    detail: str,
    charged: Micro,
    period_id: str,
) -> JobState:
    """Add to `changes` the end of `run` at `at`: its last charge, its refund when the fleet is at fault (`charged`:
    what it was charged before this change, positive), its end and its job's next state (returned)."""
    ended_at = max(at, run.started_at)
    entry, meter = accrue(changes.meter_of(run), ended_at, period_id)
    changes.meters[run.run_id] = meter
    if entry is not None:
        changes.entries.append(entry)
        charged -= entry.amount
    changes.ended.append(RunEnded(run.run_id, ended_at, exit_code, detail))
    if detail == NODE_LOST or run.preempt_reason in _FLEET_FAULTS:
        refunded(
            changes, run, charged, ended_at, period_id, f"{detail or run.preempt_reason}: refunded to {job.budget}"
        )
    state, why = next_state(job, run, exit_code, detail)
    changes.transitions.append(transition(job, state, ended_at, why))
    changes.reasons_gone.append(job.job_id)
    return state


def refunded(changes: ChangeSet, run: OpenRun, charged: Micro, at: Seconds, period_id: str, reason: str) -> None:
    """Add to `changes` the refund of a run ended by the fleet's fault (a lost node, a forced drain): everything it
    was charged (`charged`, positive) back to its owner, and the same charged to the infrastructure account. The
    entries' keys derive from the run, so a refund posts once however often it is computed."""
    changes.entries += refund(
        run.budget, run.run_id, charged, job_id=run.job_id, at=at, period_id=period_id, reason=reason
    )


def event_changes(
    events: Sequence[ExecutorEvent],
    runs: Mapping[tuple[str, int], OpenRun],
    jobs: Mapping[str, JobFacts],
    charged: Mapping[str, Micro],
    now: Seconds,
    period_id: str,
) -> ChangeSet:
    """The changes a batch of executor events makes. `runs`: the open runs the events name (an event for a run that
    is closed, or closes earlier in the batch, changes nothing); `jobs`: the jobs of the runs that end; `charged`:
    what each of those runs was charged so far."""
    changes = ChangeSet()
    closed: set[str] = set()
    confirmed: set[str] = set()
    states: dict[str, JobState] = {}
    for ev in events:
        run = runs.get((ev.job_id, ev.attempt))
        if run is None or run.run_id in closed:
            continue
        if ev.kind is EventKind.STARTED:
            if not run.confirmed and run.run_id not in confirmed:
                confirmed.add(run.run_id)
                changes.touched.append(RunTouched(run.run_id, confirmed_at=ev.at))
        elif ev.kind in (EventKind.EXITED, EventKind.LOST):
            job = jobs[ev.job_id]
            if job.job_id in states:  # a second run of one job ending in the batch starts from the first's end
                job = replace(job, state=states[job.job_id])
            detail = NODE_LOST if ev.kind is EventKind.LOST else ev.detail
            at = min(max(ev.at, run.started_at), now)
            states[job.job_id] = end_run(
                changes, job, run, at, ev.exit_code, detail, charged.get(run.run_id, 0), period_id
            )
            closed.add(run.run_id)
        elif ev.kind is EventKind.ATTACHED:
            changes.touched.append(RunTouched(run.run_id, clear_idle=True))
        elif ev.kind is EventKind.DETACHED:
            changes.touched.append(RunTouched(run.run_id, idle_since=ev.at))
        elif ev.kind is EventKind.CHECKPOINTED:
            at = min(max(ev.at, run.started_at), now)
            last = run.started_at if run.checkpoint_at is None else run.checkpoint_at
            if at > last:  # a report of an older checkpoint (or a repeat) changes nothing
                changes.touched.append(RunTouched(run.run_id, checkpoint_at=at, checkpoint_every=at - last))
    return changes
