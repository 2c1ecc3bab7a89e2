"""Jobs: submit from a spec, list, show, cancel.

Owns: the deployment's rules on a spec (the budget exists, is a leaf and the user may charge it; GPU types and clusters
exist; some pool of the fleet could ever hold the gang (service.shapes); slice, grace and session limits fit the policy;
an omitted slice or grace takes the policy's default, clamped to its limits: `slice_of`, `grace_of`), idempotent
submission by client request id (scoped to the user; a job array's tasks all in the one transaction, the retry of an
array creating none), listing with filters and cursor pagination (newest first), the job detail (history, runs, slices,
charges) and cancellation requests. Every check happens before the one transaction that writes, so a rejected submission
leaves the database as it was.

Must not: start, stop or place anything: the store records the request and the engine acts on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import and_, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from allotment.changes.eligibility import HOLD_USER
from allotment.config.arrays import ArrayRange
from allotment.config.errors import Loc
from allotment.config.limits import MAX_REQUEST_ID
from allotment.core.model import ContractClass, JobKind, PolicyConfig
from allotment.executors.accounts import NoAccount
from allotment.ledger import INFRASTRUCTURE, EntryKind
from allotment.service import cursors, dependencies
from allotment.service.charges import charge_lines
from allotment.service.context import Context
from allotment.service.errors import (
    Conflict,
    FieldProblem,
    Forbidden,
    Invalid,
    NotFound,
    ServiceError,
)
from allotment.service.outlook import class_of, renewals
from allotment.service.principal import Principal, budget_parents
from allotment.service.shapes import NodeKind, PoolShape, read_kinds, read_shapes, short_of, unfittable
from allotment.service.specs import JobSpec
from allotment.service.views import (
    ArrayInfo,
    ChargeView,
    JobDetail,
    JobEvent,
    JobPage,
    JobSummary,
    RunView,
    SliceView,
    Submitted,
)
from allotment.service.yamlinput import Document
from allotment.store.db import reading
from allotment.store.jobcontrol import array_indices
from allotment.store.jobs import NewJob, Submission, request_cancel, submit_many
from allotment.store.records import FINAL_STATES, JOB_STATES, job_events
from allotment.store.statements import gpus_of
from allotment.store.tables import ClusterRow, JobRow, LedgerEntryRow, RunRow, SliceRow

MAX_PAGE = 500


def _check_spec(
    ctx: Context,
    principal: Principal,
    doc: Document[JobSpec],
    parents: dict[str, str | None],
    known: set[str],
    shapes: Sequence[PoolShape],
    kinds: Sequence[NodeKind],
) -> list[FieldProblem]:
    """Problems of the spec in this deployment (`parents`: the budget tree; `known`: the cluster names; `shapes` and
    `kinds`: the fleet's pools and its nodes' GPUs, CPUs and memory, all read in the submitting transaction); raises
    Forbidden when the user may not charge the budget."""
    spec = doc.value
    problems: list[FieldProblem] = []
    if spec.budget not in parents or spec.budget == INFRASTRUCTURE:
        problems.append(doc.problem(("budget",), f"unknown budget {spec.budget!r}"))
    else:
        children = sorted(name for name, parent in parents.items() if parent == spec.budget)
        if children:
            reason = f"budget {spec.budget!r} has sub-budgets; submit to one of: {', '.join(children)}"
            problems.append(doc.problem(("budget",), reason))
        elif not principal.may_submit(spec.budget, parents):
            raise Forbidden(f"{principal.user} may not submit to budget {spec.budget!r}: not a member")
    return problems + request_problems(ctx, doc, known, shapes, kinds)


def request_problems(
    ctx: Context,
    doc: Document[JobSpec],
    known: set[str],
    shapes: Sequence[PoolShape],
    kinds: Sequence[NodeKind],
) -> list[FieldProblem]:
    """Problems of what the spec asks for, whoever asks and whatever budget pays: GPU types and clusters exist, a
    pool could ever hold the gang with its CPUs and memory, slice, grace, runtime and session limits fit the policy.
    A submission (with the budget's checks) and an update of a pending job (service.jobedit) both pass exactly these
    checks."""
    spec, policy = doc.value, ctx.policy
    problems: list[FieldProblem] = []

    def bad(loc: Loc, reason: str) -> None:
        problems.append(doc.problem(loc, reason))

    for i, gpu_type in enumerate(spec.resources.gpu_types):
        if gpu_type not in ctx.rates:
            bad(("resources", "gpu_types", i), f"unknown GPU type {gpu_type!r} (known: {', '.join(sorted(ctx.rates))})")
    for i, cluster in enumerate(spec.resources.clusters):
        if cluster not in known:
            bad(("resources", "clusters", i), f"unknown cluster {cluster!r} (known: {', '.join(sorted(known))})")
    if spec.grace is not None and spec.grace > policy.max_grace:
        bad(("grace",), f"{spec.grace}s is longer than the longest grace allowed ({policy.max_grace}s)")
    if spec.max_runtime is not None and spec.max_runtime <= 0:
        bad(("max_runtime",), "must be positive")
    length = slice_of(spec, policy)
    if spec.kind is JobKind.SESSION:
        if spec.total_gpus > policy.session_max_gpus:
            bad(("resources", "gpus"), f"a session holds at most {policy.session_max_gpus} GPUs ({spec.total_gpus})")
        if length > policy.session_max_length:
            bad(("contract", "slice"), f"a session lasts at most {policy.session_max_length}s ({length}s asked)")
        if length <= 0:
            bad(("contract", "slice"), "a session's length must be positive")
    elif spec.contract.contract_class is ContractClass.GUARANTEED and not (
        policy.min_slice <= length <= policy.max_slice
    ):
        bad(("contract", "slice"), f"a run slice lasts {policy.min_slice}s to {policy.max_slice}s ({length}s asked)")
    if not any(p.field.startswith("resources") for p in problems):
        r = spec.resources
        impossible = unfittable(shapes, r.gpus, r.replicas, r.gpu_types, r.clusters) or short_of(
            kinds, r.gpus, r.replicas, r.cpus, r.memory, r.gpu_types, r.clusters
        )
        if impossible is not None:
            bad(*impossible)
    return problems


def slice_of(spec: JobSpec, policy: PolicyConfig) -> int:
    """The slice (a session's length) the spec asks for, or the policy's default when it names none: the defaults
    are filled here, on the server, so every client gets the same answer and the submission echoes it."""
    if spec.contract.slice is not None:
        return spec.contract.slice
    return policy.default_session_length if spec.kind is JobKind.SESSION else policy.default_slice_of


def grace_of(spec: JobSpec, policy: PolicyConfig) -> int:
    """The grace the spec asks for, or the policy's default (default_grace capped at max_grace)."""
    return spec.grace if spec.grace is not None else policy.default_grace_of


def _request_key(principal: Principal, request_id: str | None) -> str | None:
    if request_id is None:
        return None
    if not request_id or len(request_id) > MAX_REQUEST_ID or not request_id.isprintable():
        raise Invalid.of("request_id", f"must be 1 to {MAX_REQUEST_ID} printable characters")
    return f"{principal.user}:{request_id}"


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """One submission of a batch: the acting user, the spec and the client's request id (for retries)."""

    principal: Principal
    doc: Document[JobSpec]
    request_id: str | None = None


def submit_job(ctx: Context, principal: Principal, doc: Document[JobSpec], request_id: str | None = None) -> Submitted:
    """Submit the spec as the acting user. A retry with the same request id returns the job the first created."""
    [result] = submit_jobs(ctx, [SubmitRequest(principal, doc, request_id)])
    if isinstance(result, ServiceError):
        raise result
    return result


def submit_jobs(ctx: Context, requests: Sequence[SubmitRequest]) -> list[Submitted | ServiceError]:
    """Submit a batch in one transaction (group commit): the budget tree and the clusters are read once, every
    request is checked on its own, and the valid ones are inserted together. Each request gets its own answer — the
    job, or the error that refused it (Invalid, Forbidden, Conflict) — and a refused request changes nothing. When
    the batch's transaction fails on a request id another transaction inserted meanwhile, the batch is submitted
    again one request at a time, so one request's conflict never refuses the others."""
    try:
        out = _submit_batch(ctx, requests)
    except IntegrityError:  # the other transaction has committed by now: a retry finds its job
        out = [_submit_alone(ctx, r) for r in requests]
    if any(isinstance(r, Submitted) and r.created for r in out):
        ctx.notify()
    return out


def _submit_alone(ctx: Context, request: SubmitRequest) -> Submitted | ServiceError:
    try:
        return _submit_batch(ctx, [request])[0]
    except IntegrityError as exc:  # e.g. its user or budget was removed by a concurrent change of the configuration
        return Conflict(f"the submission conflicts with a concurrent change: {type(exc.orig).__name__}")


def _submit_batch(ctx: Context, requests: Sequence[SubmitRequest]) -> list[Submitted | ServiceError]:
    out: list[Submitted | ServiceError | None] = [None] * len(requests)
    accepted: list[tuple[int, Submission]] = []
    with ctx.sessions.begin() as session:
        parents = budget_parents(session)
        known = set(session.scalars(select(ClusterRow.name)))
        shapes = read_shapes(session)
        kinds = read_kinds(session)
        named = dependencies.named_jobs(session, (r.doc.value for r in requests))
        for i, req in enumerate(requests):
            try:
                accepted.append((i, _submission(ctx, req, parents, known, shapes, kinds, named)))
            except ServiceError as exc:
                out[i] = exc
        rows = submit_many(session, [sub for _, sub in accepted], ctx.now())
        for (i, sub), (row, created) in zip(accepted, rows, strict=True):
            if not created and (
                row.budget,
                row.spec["command"],
                row.gpus,
                row.replicas,
                row.kind,
                row.array_id is None,
            ) != (sub.budget, list(sub.command), sub.gpus, sub.replicas, sub.kind.value, sub.array is None):
                request_id = requests[i].request_id
                out[i] = Conflict(f"request id {request_id!r} was used for another submission ({row.id})")
                continue
            detail = _new_detail(row) if isinstance(row, NewJob) else _detail(session, row)
            array = None
            if row.array_id is not None:
                indices = sub.array.indices if created and sub.array else array_indices(session, row.array_id)
                array = ArrayInfo(
                    id=row.array_id,
                    expression=ArrayRange(tuple(indices), row.array_limit).expression,
                    tasks=len(indices),
                    limit=row.array_limit,
                )
            out[i] = Submitted(job=detail, created=created, array=array)
    return [r for r in out if r is not None]


def _submission(
    ctx: Context,
    req: SubmitRequest,
    parents: dict[str, str | None],
    known: set[str],
    shapes: Sequence[PoolShape],
    kinds: Sequence[NodeKind],
    named: Mapping[str, tuple[str, str]],
) -> Submission:
    """The store's record of a checked request (`named`: the jobs the batch's dependencies name, with their owner and
    budget); raises Invalid or Forbidden for a request that may not be made."""
    spec, principal = req.doc.value, req.principal
    key = _request_key(principal, req.request_id)
    try:
        ctx.run_as.require(principal.user)  # owner mode: a job runs as its owner, so the owner needs an account
    except NoAccount as exc:
        raise Invalid.of("user", exc.message) from None
    problems = _check_spec(ctx, principal, req.doc, parents, known, shapes, kinds)
    problems += dependencies.problems(req.doc, principal, named, parents)
    if problems:
        raise Invalid("the job spec is invalid: " + "; ".join(str(p) for p in problems), problems)
    return Submission(
        budget=spec.budget,
        user=principal.user,
        command=list(spec.command),
        gpus=spec.resources.gpus,
        replicas=spec.resources.replicas,
        name=spec.name or "",
        kind=spec.kind,
        contract=spec.contract.contract_class,
        slice_seconds=slice_of(spec, ctx.policy),
        priority=spec.priority,
        grace=grace_of(spec, ctx.policy),
        max_runtime=spec.max_runtime,
        gpu_types=spec.resources.gpu_types,
        clusters=spec.resources.clusters,
        fallback_opportunistic=spec.contract.fallback_opportunistic,
        requeue=spec.requeue,
        env=dict(spec.env),
        image=spec.image,
        workdir=spec.workdir,
        request_id=key,
        cpus=spec.resources.cpus,
        memory=spec.resources.memory,
        hold=HOLD_USER if spec.hold else None,
        array=spec.array,
        dependency=spec.dependency.text if spec.dependency is not None else None,
    )


def summary(row: JobRow | NewJob) -> JobSummary:
    return JobSummary(
        id=row.id,
        name=row.name,
        budget=row.budget,
        user=row.user,
        kind=row.kind,
        contract=row.contract,
        gpus=row.gpus,
        replicas=row.replicas,
        priority=row.priority,
        state=row.state,
        state_reason=row.state_reason,
        attempt=row.attempt,
        submitted_at=row.submitted_at,
        updated_at=row.updated_at,
        cancel_requested_at=row.cancel_requested_at,
        hold=row.hold,
        requeues=row.requeues,
        array_id=row.array_id,
        array_index=row.array_index,
        dependency=row.dependency,
    )


def _detail(session: Session, row: JobRow) -> JobDetail:
    runs = list(session.scalars(select(RunRow).where(RunRow.job_id == row.id).order_by(RunRow.attempt)))
    slices = list(
        session.scalars(select(SliceRow).where(SliceRow.job_id == row.id).order_by(SliceRow.start, SliceRow.id))
    )
    entries = list(
        session.scalars(select(LedgerEntryRow).where(LedgerEntryRow.job_id == row.id).order_by(LedgerEntryRow.id))
    )
    history = [
        JobEvent(at=e.at, from_state=e.from_state, to_state=e.to_state, reason=e.reason)
        for e in job_events(session, row.id)
    ]
    return _as_detail(row, history, runs, slices, entries)


def _new_detail(row: NewJob) -> JobDetail:
    """The detail of a job this transaction just created: its first history record and nothing else yet (no
    queries: store.jobs.submit wrote exactly this)."""
    first = JobEvent(at=row.submitted_at, from_state=None, to_state=row.state, reason=row.state_reason)
    return _as_detail(row, [first], [], [], [])


def _as_detail(
    row: JobRow | NewJob,
    history: list[JobEvent],
    runs: list[RunRow],
    slices: list[SliceRow],
    entries: list[LedgerEntryRow],
) -> JobDetail:
    spent = (EntryKind.CHARGE.value, EntryKind.REFUND.value)
    spec = dict(row.spec or {})
    return JobDetail(
        **summary(row).model_dump(),
        command=list(spec.get("command") or []),
        env=dict(spec.get("env") or {}),
        image=spec.get("image"),
        workdir=spec.get("workdir"),
        slice_seconds=row.slice_seconds,
        grace=row.grace,
        max_runtime=row.max_runtime,
        gpu_types=list(row.gpu_types),
        clusters=list(row.clusters),
        fallback_opportunistic=row.fallback_opportunistic,
        requeue=row.requeue,
        request_id=row.request_id.split(":", 1)[1] if row.request_id else None,
        cpus=row.cpus,
        memory_mib=row.memory_mib,
        history=history,
        runs=[
            RunView(
                id=r.id,
                attempt=r.attempt,
                started_at=r.started_at,
                ended_at=r.ended_at,
                placement=list(r.placement),
                run_class=r.run_class,
                slice_end=r.slice_end,
                exit_code=r.exit_code,
                end_reason=r.end_reason,
                preempt_reason=r.preempt_reason,
                kill_at=r.kill_at,
                price=r.price,
                began_as=class_of(r).began_as,
                class_since=class_of(r).class_since,
                renewals=renewals(r.id, slices),
            )
            for r in runs
        ],
        slices=[SliceView(run_id=s.run_id, start=s.start, end=s.end, kind=s.kind) for s in slices],
        charges=[
            ChargeView(
                at=e.at,
                budget=e.budget,
                kind=e.kind,
                amount_micro=e.amount_micro,
                run_id=e.run_id,
                period=e.period_id,
                memo=e.memo,
            )
            for e in entries
        ],
        charge_lines=charge_lines(entries, {r.id: gpus_of(r.placement) for r in runs}),
        charged_micro=-sum(e.amount_micro for e in entries if e.budget == row.budget and e.kind in spent),
    )


def visible_job(session: Session, principal: Principal, job_id: str) -> JobRow:
    """The job, when the principal may see it: NotFound when it does not exist, Forbidden otherwise."""
    row = session.get(JobRow, job_id)
    if row is None:
        raise NotFound(f"no job {job_id!r}")
    if row.user != principal.user and not principal.may_view_budget_jobs(row.budget, budget_parents(session)):
        raise Forbidden(f"{principal.user} may not see job {job_id}: it belongs to budget {row.budget}")
    return row


def get_job(ctx: Context, principal: Principal, job_id: str) -> JobDetail:
    with reading(ctx.sessions) as session:
        return _detail(session, visible_job(session, principal, job_id))


def list_jobs(
    ctx: Context,
    principal: Principal,
    *,
    states: Sequence[str] = (),
    budget: str | None = None,
    user: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> JobPage:
    """Jobs newest first (the queue is visible to every user; details are not). `cursor` continues a listing."""
    unknown = sorted(set(states) - JOB_STATES)
    if unknown:
        raise Invalid.of("state", f"unknown state {unknown[0]!r} (states: {', '.join(sorted(JOB_STATES))})")
    if not 1 <= limit <= MAX_PAGE:
        raise Invalid.of("limit", f"must be between 1 and {MAX_PAGE}")
    stmt = select(JobRow).order_by(JobRow.submitted_at.desc(), JobRow.id.desc()).limit(limit + 1)
    if states:
        stmt = stmt.where(JobRow.state.in_(sorted(set(states))))
    if budget is not None:
        stmt = stmt.where(JobRow.budget == budget)
    if user is not None:
        stmt = stmt.where(JobRow.user == user)
    if kind is not None:
        stmt = stmt.where(JobRow.kind == kind)
    if cursor:
        (at,), job_id = cursors.decode(cursor, "j", 1)
        stmt = stmt.where(or_(JobRow.submitted_at < at, and_(JobRow.submitted_at == at, JobRow.id < job_id)))
    with reading(ctx.sessions) as session:
        rows = list(session.scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return JobPage(
        items=[summary(r) for r in rows],
        next_cursor=cursors.encode("j", rows[-1].submitted_at, job_id=rows[-1].id) if more and rows else None,
    )


def cancel_job(ctx: Context, principal: Principal, job_id: str, kinds: Sequence[str] = ()) -> JobSummary:
    """Ask the engine to cancel: the owner, a lead of the budget's subtree, or an administrator."""
    with ctx.sessions.begin() as session:
        row = visible_job(session, principal, job_id)
        if kinds and row.kind not in kinds:
            raise NotFound(f"no {' or '.join(kinds)} {job_id!r}")
        if not principal.may_manage_job(row.user, row.budget, budget_parents(session)):
            raise Forbidden(f"{principal.user} may not cancel {job_id}: it is {row.user}'s job in {row.budget}")
        if row.state in FINAL_STATES:
            raise Conflict(f"job {job_id} is already {row.state}")
        request_cancel(session, job_id, ctx.now())
        result = summary(row)
    ctx.notify()
    return result
