"""Applying one cycle's decisions to the database, inside the cycle's transaction.

Owns: what each decision means for the rows — a start opens a run (metered from the decision, when the GPUs are
handed over), grants its slice, drops its reservation and records a launch intent; a preemption signals the run
and records a terminate intent (a lost node ends the run at once, refunded); a renewal extends the slice; a lapse
reprices the run to opportunistic; reservations are replaced; pending reasons are rewritten where they changed.

Must not: decide anything (the core did) or talk to an executor (intents are delivered after the commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.orm import Session

from allotment.core.decisions import Decisions, Preempt, PreemptReason, Start, WaitReason
from allotment.core.model import Micro, PolicyConfig, RunClass, Seconds
from allotment.ledger.charges import price_for, run_rate
from allotment.ports.executor import LaunchSpec
from allotment.ports.store import IntentKind
from allotment.store.accounts import dialect_insert
from allotment.store.metering import charge_run, new_run, refund_run, reprice_run
from allotment.store.records import transition
from allotment.store.tables import IntentRow, JobRow, NodeRow, PendingReasonRow, ReservationRow, RunRow, SliceRow


def spec_to_json(spec: LaunchSpec) -> dict[str, Any]:
    return {
        "job_id": spec.job_id,
        "attempt": spec.attempt,
        "command": list(spec.command),
        "placement": [{"node": a.node, "gpus": list(a.gpus)} for a in spec.placement],
        "budget": spec.budget,
        "user": spec.user,
        "kind": spec.kind,
        "grace": spec.grace,
        "slice_end": spec.slice_end,
        "env": dict(spec.env),
        "workdir": spec.workdir,
        "image": spec.image,
    }


def open_run(session: Session, job_id: str) -> RunRow | None:
    return session.scalars(_OPEN_RUN, {"job_id": job_id}).first()


# statements every cycle runs, built once (decisions 39 and 42)
_OPEN_RUN = select(RunRow).where(RunRow.job_id == bindparam("job_id"), RunRow.ended_at.is_(None))
_JOBS = select(JobRow).where(JobRow.id.in_(bindparam("ids", expanding=True)))
_NODE_TYPES = select(NodeRow.name, NodeRow.gpu_type)
_INSERT_SLICES = insert(SliceRow)
_INSERT_INTENTS = insert(IntentRow)
_DELETE_RESERVATIONS = delete(ReservationRow)
_INSERT_RESERVATIONS = insert(ReservationRow)


class Applier:
    def __init__(self, session: Session, now: Seconds, policy: PolicyConfig, rates: Mapping[str, Micro]) -> None:
        self.session = session
        self.now = now
        self.policy = policy
        self.rates = rates
        self.intents = 0
        self._intents: list[dict[str, Any]] = []
        self._slices: list[dict[str, Any]] = []
        self._gpu_type: dict[str, str] = {}

    def gpu_type(self, node: str) -> str:
        if not self._gpu_type:
            self._gpu_type = dict(self.session.execute(_NODE_TYPES).all())
        return self._gpu_type[node]

    def intent(self, kind: IntentKind, job_id: str, attempt: int, run_id: str | None, payload: dict[str, Any]) -> None:
        """Record an executor command; the cycle's intents are written together, in this order, by apply()."""
        self._intents.append(
            {
                "job_id": job_id,
                "run_id": run_id,
                "attempt": attempt,
                "kind": kind.value,
                "payload": payload,
                "created_at": self.now,
                "delivered_at": None,
            }
        )
        self.intents += 1

    def slice(self, run_id: str, job_id: str, end: Seconds, kind: str) -> None:
        """Record a slice granted or renewed from now; written together by apply(), like intents."""
        self._slices.append({"run_id": run_id, "job_id": job_id, "start": self.now, "end": end, "kind": kind})

    # -- decisions ---------------------------------------------------------------------------------------------
    def apply(self, d: Decisions) -> None:
        jobs = self._jobs({s.job_id for s in d.starts} | {p.job_id for p in d.preempts})
        for p in d.preempts:
            self.preempt(jobs[p.job_id], p)
        for r in d.renews:
            run = open_run(self.session, r.job_id)
            if run is not None:
                run.slice_end = r.slice_end
                self.slice(run.id, r.job_id, r.slice_end, "renew")
        for lapse in d.lapses:
            run = open_run(self.session, lapse.job_id)
            if run is not None and run.run_class == RunClass.GUARANTEED.value:
                reprice_run(self.session, run.id, self.now, RunClass.OPPORTUNISTIC, self.policy.opportunistic_price)
        for s in d.starts:
            self.start(jobs[s.job_id], s)
        self.reservations(d)
        self.session.flush()  # the runs that slices and intents name go first
        if self._slices:
            self.session.execute(_INSERT_SLICES, self._slices)
            self._slices = []
        if self._intents:
            self.session.execute(_INSERT_INTENTS, self._intents)  # ids follow this order: delivery order
            self._intents = []

    def _jobs(self, ids: set[str]) -> dict[str, JobRow]:
        if not ids:
            return {}
        rows = self.session.scalars(_JOBS, {"ids": sorted(ids)})
        return {row.id: row for row in rows}

    def start(self, job: JobRow, s: Start) -> None:
        attempt = job.attempt
        placement: list[dict[str, object]] = [{"node": a.node, "gpus": list(a.gpus)} for a in s.placement]
        rate = run_rate(((self.gpu_type(a.node), len(a.gpus)) for a in s.placement), self.rates)
        run = new_run(
            self.session,
            job_id=job.id,
            attempt=attempt,
            started_at=self.now,
            placement=placement,
            run_class=s.run_class,
            slice_end=s.slice_end,
            rate=rate,
            price=price_for(s.run_class, self.policy),
        )
        run.backfill_for = s.backfill_for
        if s.slice_end is not None:
            self.slice(run.id, job.id, s.slice_end, "grant")
        job.attempt = attempt + 1
        nodes = ", ".join(a.node for a in s.placement)
        transition(
            self.session,
            job,
            "running",
            self.now,
            f"started ({s.rule}) as {s.run_class.value} on {nodes}"
            + (f", slice until {s.slice_end}" if s.slice_end is not None else ""),
        )
        spec = LaunchSpec(
            job_id=job.id,
            attempt=attempt,
            command=tuple(job.spec.get("command", ())),
            placement=s.placement,
            budget=job.budget,
            user=job.user,
            kind=job.kind,
            grace=min(job.grace, self.policy.max_grace),
            slice_end=s.slice_end,
            env=dict(job.spec.get("env", {})),
            workdir=job.spec.get("workdir"),
            image=job.spec.get("image"),
        )
        self.intent(IntentKind.LAUNCH, job.id, attempt, run.id, spec_to_json(spec))

    def preempt(self, job: JobRow, p: Preempt) -> None:
        run = open_run(self.session, job.id)
        if run is None or run.signalled_at is not None:
            return
        run.signalled_at, run.kill_at = self.now, self.now + p.grace
        run.preempt_reason, run.preemptor, run.requeue = p.reason.value, p.preemptor, p.requeue
        self.intent(IntentKind.TERMINATE, job.id, run.attempt, run.id, {"grace": p.grace})
        why = f"preempted ({p.reason.value})" + (f" for {p.preemptor}" if p.preemptor else "")
        if p.reason is PreemptReason.NODE_DOWN:
            end_run(self.session, job, run, self.now, None, "node lost", self.policy)
            return
        transition(self.session, job, "preempting", self.now, f"{why}, grace {p.grace}s")

    def reservations(self, d: Decisions) -> None:
        """Replace the reservations with this cycle's (each carries when it was first made)."""
        self.session.execute(_DELETE_RESERVATIONS)
        if d.reserves:
            self.session.execute(
                _INSERT_RESERVATIONS,
                [
                    {
                        "job_id": r.job_id,
                        "nodes": [[n, g] for n, g in r.nodes],
                        "planned_start": r.planned_start,
                        "kind": r.kind.value,
                        "since": r.since,
                        "gave_way": list(r.gave_way),
                    }
                    for r in d.reserves
                ],
            )


def end_run(
    session: Session,
    job: JobRow,
    run: RunRow,
    at: Seconds,
    exit_code: int | None,
    detail: str,
    policy: PolicyConfig,
    locked: bool = False,
) -> str:
    """Close a run that has released its GPUs: charge it to its end, refund it when the fleet is at fault, and move
    its job on (requeued, or to its final state). Returns the job's new state. `locked`: the caller read `run` under
    a row lock in this transaction (otherwise charging it reads and locks it again)."""
    run.ended_at = max(at, run.started_at)
    run.exit_code = exit_code
    run.end_reason = detail
    charge_run(session, run.id, run.ended_at, job.budget, locked=run if locked else None)
    reason = run.preempt_reason
    fleet_fault = detail == "node lost" or reason in (PreemptReason.FORCED.value, PreemptReason.NODE_DOWN.value)
    if fleet_fault:
        refund_run(session, run.id, run.ended_at, f"{detail or reason}: refunded to {job.budget}")
    if job.cancel_requested_at is not None:
        state, why = "cancelled", "cancelled by its owner"
    elif reason is not None:
        if run.requeue if run.requeue is not None else job.requeue:
            state, why = "pending", f"requeued after {reason}"
        elif reason == PreemptReason.MAX_RUNTIME.value:
            state, why = "failed", "reached its maximum runtime"
        else:
            state, why = "completed", f"ended: {reason}"
    elif fleet_fault:
        state, why = ("pending", "requeued: its node was lost") if job.requeue else ("lost", "its node was lost")
    elif exit_code == 0:
        state, why = "completed", "exited 0"
    else:
        state, why = "failed", f"exited with code {exit_code}" + (f" ({detail})" if detail else "")
    transition(session, job, state, run.ended_at, why)
    session.connection().execute(_DELETE_REASON, {"job_id": job.id})  # Core: no flush of the changes above yet
    return state


_DELETE_REASON = delete(PendingReasonRow).where(PendingReasonRow.job_id == bindparam("job_id"))


def reason_values(r: WaitReason) -> tuple[object, ...]:
    return (
        r.blocker.value,
        r.message,
        r.needed_gpus,
        r.free_gpus,
        r.estimated_start,
        tuple((h.kind.value, h.detail, h.start) for h in r.hints),
    )


ESTIMATE_TOLERANCE = 300
"""A pending reason is rewritten when anything but its estimated start changed, or the estimate moved more than this
many seconds: estimates drift a little every cycle and rewriting thousands of rows for that is waste."""


def _same_reason(old: tuple[object, ...] | None, new: tuple[object, ...]) -> bool:
    if old is None:
        return False
    if old[:4] != new[:4] or _hint_text(old[5]) != _hint_text(new[5]):
        return False
    a, b = old[4], new[4]
    if a is None or b is None:
        return a is b
    assert isinstance(a, int) and isinstance(b, int)
    return abs(a - b) <= ESTIMATE_TOLERANCE


def _hint_text(hints: object) -> object:
    """Hints without their start times (a "start now" hint's time moves with every cycle)."""
    assert isinstance(hints, tuple)
    return tuple(h[:2] for h in hints)


def reason_hints(r: WaitReason) -> list[tuple[str, str, Seconds | None]]:
    return [(h.kind.value, h.detail, h.start) for h in r.hints]


def write_reasons(
    session: Session,
    pending: Mapping[str, WaitReason],
    started: set[str],
    now: Seconds,
    cache: dict[str, tuple[object, ...]],
) -> int:
    """Upsert the reasons that changed since the last cycle (`cache` holds what was last written).

    decide() hands one WaitReason object to every job of one shape and blocker, so the values are built once per
    object and shared in the cache, and each (last written, new) pair of shared values is compared once."""
    stmt = dialect_insert(session)(PendingReasonRow)
    changed: list[dict[str, object]] = []
    values_of: dict[int, tuple[object, ...]] = {}
    verdicts: dict[tuple[int, int], tuple[tuple[object, ...] | None, bool]] = {}  # holds `old`, so its id stays its own
    for job_id, reason in pending.items():
        values = values_of.get(id(reason))
        if values is None:
            values = values_of[id(reason)] = reason_values(reason)
        old = cache.get(job_id)
        pair = (id(old), id(values))
        if pair not in verdicts:
            verdicts[pair] = (old, _same_reason(old, values))
        if not verdicts[pair][1]:
            cache[job_id] = values
            changed.append(
                {
                    "job_id": job_id,
                    "blocker": values[0],
                    "message": values[1],
                    "needed_gpus": values[2],
                    "free_gpus": values[3],
                    "estimated_start": values[4],
                    "hints": [{"kind": k, "detail": d, "start": t} for k, d, t in reason_hints(reason)],
                    "at": now,
                }
            )
    if changed:
        # one upsert for all changed rows (executemany), not one round trip each
        session.execute(
            stmt.on_conflict_do_update(
                index_elements=["job_id"],
                set_={k: getattr(stmt.excluded, k) for k in changed[0] if k != "job_id"},
            ),
            changed,
        )
    gone = [j for j in cache if j not in pending]
    for j in gone:
        del cache[j]
    if started:
        session.execute(delete(PendingReasonRow).where(PendingReasonRow.job_id.in_(sorted(started))))
    return len(changed)
