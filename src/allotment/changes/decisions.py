"""What one cycle's decisions mean for durable state: a pure function from (snapshot, decisions, now, rules) and the
facts a store loads for them to a ChangeSet.

Owns: a start opens a run (metered from the decision, when the GPUs are handed over: rate from the placement's GPU
types, price from its class), grants its slice, advances its job's attempt and records a launch intent; a preemption
signals the run and records a terminate intent with its grace (a lost node ends the run at once, refunded); a
renewal extends the slice; a lapse charges the run to now at its old price and reprices it to opportunistic; the
reservations are replaced; a pending job whose cancellation was asked ends as cancelled (decision 46: it holds
nothing, so there is nothing for the core to decide), and so does one whose dependency can never be satisfied (the
eligibility gate found it: changes.eligibility; decision 64).

Must not: decide anything (the core did), price anything itself (allotment.ledger does), or read and write rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from allotment.changes.events import end_run, transition
from allotment.changes.records import (
    ChangeSet,
    JobFacts,
    LaunchIntent,
    OpenRun,
    Rules,
    RunOpened,
    RunSignalled,
    RunTouched,
    SliceGrant,
    TerminateIntent,
)
from allotment.core.capacity import replicas_on
from allotment.core.decisions import Decisions, Preempt, PreemptReason, Start
from allotment.core.jobstate import JobState
from allotment.core.model import Allocation, Micro, RunClass, Seconds, Snapshot
from allotment.ledger.charges import accrue, price_for, reprice, run_rate
from allotment.ledger.entries import run_id as make_run_id
from allotment.ports.executor import LaunchSpec

CANCELLED_BY_OWNER = "cancelled by its owner"


def decision_changes(
    snap: Snapshot,
    decisions: Decisions,
    now: Seconds,
    rules: Rules,
    runs: Mapping[str, OpenRun],
    jobs: Mapping[str, JobFacts],
    charged: Mapping[str, Micro],
    period_id: str,
) -> ChangeSet:
    """The changes `decisions` make. `runs`: job id → its open run; `jobs`: the facts of every job started or
    preempted; `charged`: what the runs of jobs preempted for a lost node were charged so far."""
    changes = ChangeSet()
    for p in decisions.preempts:
        _preempt(changes, jobs[p.job_id], runs.get(p.job_id), p, now, charged, period_id)
    for r in decisions.renews:
        run = runs.get(r.job_id)
        if run is not None:
            changes.touched.append(RunTouched(run.run_id, slice_end=r.slice_end))
            changes.slices.append(SliceGrant(run.run_id, r.job_id, now, r.slice_end, "renew"))
    for lapse in decisions.lapses:
        run = runs.get(lapse.job_id)
        if run is not None and run.run_class is RunClass.GUARANTEED and run.run_id not in changes.reclassed:
            repriced(changes, run, now, RunClass.OPPORTUNISTIC, rules.policy.opportunistic_price, period_id)
    if decisions.starts:
        gpu_type = {n.name: n.gpu_type for n in snap.nodes}
        for s in decisions.starts:
            _start(changes, jobs[s.job_id], s, now, rules, gpu_type)
    changes.reservations = decisions.reserves
    return changes


def repriced(changes: ChangeSet, run: OpenRun, at: Seconds, run_class: RunClass, price: int, period_id: str) -> None:
    """Add to `changes` a run's class and price changing from `at` on (or from what is already charged, if later):
    the run is first charged up to there at its old price."""
    entry, meter = accrue(changes.meter_of(run), at, period_id)
    if entry is not None:
        changes.entries.append(entry)
    changes.meters[run.run_id] = reprice(meter, price, meter.charged_until)
    changes.reclassed[run.run_id] = run_class


def _start(
    changes: ChangeSet, job: JobFacts, s: Start, now: Seconds, rules: Rules, gpu_type: Mapping[str, str]
) -> None:
    attempt = job.attempt
    run_id = make_run_id(job.job_id, attempt)
    rate = run_rate(((gpu_type[a.node], len(a.gpus)) for a in s.placement), rules.rates)
    price = price_for(s.run_class, rules.policy)
    changes.opened.append(
        RunOpened(run_id, job.job_id, attempt, now, s.placement, s.run_class, s.slice_end, rate, price, s.backfill_for)
    )
    if s.slice_end is not None:
        changes.slices.append(SliceGrant(run_id, job.job_id, now, s.slice_end, "grant"))
    nodes = ", ".join(a.node for a in s.placement)
    why = f"started ({s.rule}) as {s.run_class.value} on {nodes}" + (
        f", slice until {s.slice_end}" if s.slice_end is not None else ""
    )
    changes.transitions.append(transition(job, JobState.RUNNING, now, why, attempt=attempt + 1))
    spec = LaunchSpec(
        job_id=job.job_id,
        attempt=attempt,
        command=job.command,
        placement=s.placement,
        budget=job.budget,
        user=job.user,
        kind=job.kind,
        grace=min(job.grace, rules.policy.max_grace),
        slice_end=s.slice_end,
        env=dict(job.env),
        workdir=job.workdir,
        image=job.image,
        cpus=_per_node(job.cpus, job.gpus, s.placement),
        memory=_per_node(job.memory, job.gpus, s.placement),
        array=job.array,
    )
    changes.intents.append(LaunchIntent(run_id, spec))


def _per_node(request: int, gpus: int, placement: tuple[Allocation, ...]) -> int:
    """A per-replica request on the node of the placement holding the most replicas (every node of a multi-node gang
    holds as many), by placement's rule (core.capacity.replicas_on)."""
    if request <= 0:
        return 0
    return max((replicas_on(gpus, len(a.gpus)) for a in placement), default=0) * request


def _preempt(
    changes: ChangeSet,
    job: JobFacts,
    run: OpenRun | None,
    p: Preempt,
    now: Seconds,
    charged: Mapping[str, Micro],
    period_id: str,
) -> None:
    if run is None or run.signalled:
        return
    changes.signalled.append(RunSignalled(run.run_id, now, now + p.grace, p.reason.value, p.preemptor, p.requeue))
    changes.intents.append(TerminateIntent(job.job_id, run.attempt, run.run_id, p.grace))
    if p.reason is PreemptReason.NODE_DOWN:
        signalled = run._replace(signalled=True, preempt_reason=p.reason.value, requeue=p.requeue)
        end_run(changes, job, signalled, now, None, "node lost", charged.get(run.run_id, 0), period_id)
        return
    why = f"preempted ({p.reason.value})" + (f" for {p.preemptor}" if p.preemptor else "")
    changes.transitions.append(transition(job, JobState.PREEMPTING, now, f"{why}, grace {p.grace}s"))


def cancelled_pending(jobs: Sequence[JobFacts], now: Seconds) -> ChangeSet:
    """Pending jobs whose cancellation was asked end now, as cancelled (they hold nothing: no run to signal)."""
    changes = ChangeSet()
    for job in jobs:
        if job.state is JobState.PENDING and job.cancel_requested:
            changes.transitions.append(transition(job, JobState.CANCELLED, now, CANCELLED_BY_OWNER))
            changes.reasons_gone.append(job.job_id)
    return changes


def never_satisfied(jobs: Mapping[str, JobFacts], reasons: Mapping[str, str], now: Seconds) -> ChangeSet:
    """Pending jobs whose dependency can never be satisfied end now, as cancelled, with the gate's reason (Slurm's
    DependencyNeverSatisfied, cancelled as with its kill_invalid_depend). `jobs`: their facts."""
    changes = ChangeSet()
    for job_id, reason in sorted(reasons.items()):
        job = jobs.get(job_id)
        if job is not None and job.state is JobState.PENDING:
            changes.transitions.append(transition(job, JobState.CANCELLED, now, f"cancelled: {reason}"))
            changes.reasons_gone.append(job_id)
    return changes
