"""Writing users' requests: submissions and cancellations (the engine acts on them in its next cycle).

Owns: inserting a job in the pending state with its first history record, idempotently per client request id
(one at a time, or a batch with one statement per table: `submit_many`), a job array's tasks as one job row each
(`job_rows`: ids `<array>_<index>`, the request id on the first task only, the array's facts in each task's spec),
and marking a cancellation request.
Must not: start, stop or place anything (the engine is the single writer of scheduling state).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from allotment.config.arrays import ArrayRange, new_array_id, task_id
from allotment.core.jobstate import ACTIVE, JobState
from allotment.core.model import ContractClass, JobKind, Seconds
from allotment.store.bulk import bulk_insert
from allotment.store.db import in_batches
from allotment.store.tables import JobEventRow, JobRow


@dataclass(frozen=True, slots=True)
class Submission:
    budget: str
    user: str
    command: Sequence[str]
    gpus: int
    replicas: int = 1
    name: str = ""
    kind: JobKind = JobKind.BATCH
    contract: ContractClass = ContractClass.GUARANTEED
    slice_seconds: Seconds = 3600
    priority: int = 0
    grace: Seconds = 60
    max_runtime: Seconds | None = None
    gpu_types: Sequence[str] = ()
    clusters: Sequence[str] = ()
    fallback_opportunistic: bool = False
    requeue: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    image: str | None = None
    workdir: str | None = None
    request_id: str | None = None
    job_id: str | None = None
    cpus: int = 0
    """CPUs per replica (0: no request)."""
    memory: int = 0
    """MiB of memory per replica (0: no request)."""
    hold: str | None = None
    """Inserted held (user or admin; allotment.changes.eligibility), or not."""
    array: ArrayRange | None = None
    """Submit a job array: one task per index, each a job (`job_rows`)."""
    array_id: str | None = None
    """The array's id (default: a new one)."""
    dependency: str | None = None
    """The canonical dependency text (allotment.changes.dependency), or None."""


@dataclass(frozen=True, slots=True)
class NewJob:
    """What `submit_many` inserted for a new job, column by column as in JobRow (a plain record: the batch is
    written with core INSERTs, and tracking an ORM object per job would cost more than the INSERT)."""

    id: str
    request_id: str | None
    budget: str
    user: str
    name: str
    spec: dict[str, Any]
    gpus: int
    replicas: int
    kind: str
    contract: str
    slice_seconds: Seconds
    priority: int
    grace: Seconds
    max_runtime: Seconds | None
    gpu_types: list[str]
    clusters: list[str]
    fallback_opportunistic: bool
    requeue: bool
    submitted_at: Seconds
    state: str
    attempt: int
    state_reason: str
    updated_at: Seconds
    cancel_requested_at: Seconds | None
    cpus: int
    memory_mib: int
    hold: str | None = None
    revision: int = 0
    requeue_attempt: int | None = None
    requeues: int = 0
    array_id: str | None = None
    array_index: int | None = None
    array_limit: int | None = None
    dependency: str | None = None


_JOBS = JobRow.metadata.tables["jobs"]
"""Rows go to the tables, not the ORM classes: the ORM's bulk insert spends more time collecting each row's
parameters (0.7 s for an array of 10,000 tasks) than SQLite takes to write them (decision 66)."""
_EVENTS = JobRow.metadata.tables["job_events"]


def new_job_id() -> str:
    return "j-" + uuid.uuid4().hex[:12]


def submit(session: Session, sub: Submission, now: Seconds) -> tuple[JobRow, bool]:
    """Insert the job (pending) with its first history record. With a `request_id` a retried submission returns the
    job the first one created and False; a new job returns True. Commits nothing: the caller owns the
    transaction."""
    if sub.request_id is not None:
        found = session.scalars(select(JobRow).where(JobRow.request_id == sub.request_id)).first()
        if found is not None:
            return found, False
    if sub.array is not None:
        [(row, created)] = submit_many(session, [sub], now)
        return (row if isinstance(row, JobRow) else session.get_one(JobRow, row.id)), created
    job = _row(sub, now)
    first = _first_event(job)
    if sub.request_id is None:  # nothing can collide: no savepoint needed
        _insert(session, job, first)
        return job, True
    try:
        with session.begin_nested():  # a concurrent retry with the same request id loses the race here
            _insert(session, job, first)
    except IntegrityError:
        if sub.request_id is None:
            raise
        found = session.scalars(select(JobRow).where(JobRow.request_id == sub.request_id)).first()
        if found is None:
            raise
        return found, False
    return job, True


def submit_many(session: Session, subs: Sequence[Submission], now: Seconds) -> list[tuple[JobRow | NewJob, bool]]:
    """`submit` for a batch, in the caller's transaction: one query finds the request ids already used, one INSERT
    per table writes the new jobs and their first history records (every task of an array: its answer is the first
    task, which holds the request id, so a retried array finds it and creates nothing). A request id repeated inside
    the batch returns the job its first use created. A concurrent transaction that inserts one of the same request
    ids first makes this one fail with IntegrityError (the caller retries the batch one submission at a time)."""
    keys = sorted({s.request_id for s in subs if s.request_id is not None})
    known: dict[str, JobRow | NewJob] = {}
    for batch in in_batches(keys):
        rows = session.scalars(select(JobRow).where(JobRow.request_id.in_(batch)))
        known.update((row.request_id, row) for row in rows if row.request_id is not None)
    out: list[tuple[JobRow | NewJob, bool]] = []
    new_jobs: list[dict[str, Any]] = []
    for sub in subs:
        found = known.get(sub.request_id) if sub.request_id is not None else None
        if found is not None:
            out.append((found, False))
            continue
        created = job_rows(sub, now)
        job = NewJob(**created[0])
        if sub.request_id is not None:
            known[sub.request_id] = job
        new_jobs.extend(created)
        out.append((job, True))
    if new_jobs:  # one INSERT (or COPY) per table: no unit of work to track hundreds of objects
        bulk_insert(session, _JOBS, new_jobs)
        first = {"at": now, "from_state": None, "to_state": JobState.PENDING.value, "reason": "submitted"}
        bulk_insert(session, _EVENTS, [{"job_id": v["id"], **first} for v in new_jobs])
    return out


def job_rows(sub: Submission, now: Seconds) -> list[dict[str, Any]]:
    """The jobs table's rows for a submission: its job's, or one per task of an array, in index order. A task is a
    job like any other (scheduled, charged and explained alike); it differs in its id (`<array>_<index>`), its
    array columns (array_id, array_index, array_limit: the `%N` the eligibility gate applies) and its spec's
    `array` entry (id, index, count, min, max: the executor's ALLOT_ARRAY_* variables). Only the first task holds
    the request id (it is unique)."""
    base = job_values(sub, now)
    if sub.array is None:
        return [base]
    array_id = sub.array_id or new_array_id()
    indices = sub.array.indices
    count, low, high = len(indices), indices[0], indices[-1]
    base["array_id"], base["array_limit"] = array_id, sub.array.limit
    spec = base["spec"]
    rows: list[dict[str, Any]] = []
    for n, index in enumerate(indices):
        row = dict(base)
        row["id"] = task_id(array_id, index)
        row["array_index"] = index
        row["spec"] = {**spec, "array": {"id": array_id, "index": index, "count": count, "min": low, "max": high}}
        if n:
            row["request_id"] = None
        rows.append(row)
    return rows


def _row(sub: Submission, now: Seconds) -> JobRow:
    return JobRow(**job_values(sub, now))


def job_values(sub: Submission, now: Seconds) -> dict[str, Any]:
    return {
        "id": sub.job_id or new_job_id(),
        "request_id": sub.request_id,
        "budget": sub.budget,
        "user": sub.user,
        "name": sub.name or (sub.command[0] if sub.command else "job"),
        "spec": {"command": list(sub.command), "env": dict(sub.env), "image": sub.image, "workdir": sub.workdir},
        "gpus": sub.gpus,
        "replicas": sub.replicas,
        "kind": sub.kind.value,
        "contract": sub.contract.value,
        "slice_seconds": sub.slice_seconds,
        "priority": sub.priority,
        "grace": sub.grace,
        "max_runtime": sub.max_runtime,
        "gpu_types": list(sub.gpu_types),
        "clusters": list(sub.clusters),
        "fallback_opportunistic": sub.fallback_opportunistic,
        "requeue": sub.requeue,
        "submitted_at": now,
        "state": JobState.PENDING.value,
        "attempt": 0,
        "state_reason": "submitted",
        "updated_at": now,
        "cancel_requested_at": None,
        "cpus": sub.cpus,
        "memory_mib": sub.memory,
        "hold": sub.hold,
        "revision": 0,
        "requeue_attempt": None,
        "requeues": 0,
        "array_id": None,
        "array_index": None,
        "array_limit": None,
        "dependency": sub.dependency,
    }


def _first_event(job: JobRow) -> JobEventRow:
    return JobEventRow(
        job_id=job.id, at=job.submitted_at, from_state=None, to_state=JobState.PENDING.value, reason="submitted"
    )


def _insert(session: Session, job: JobRow, first: JobEventRow) -> None:
    session.add(job)
    session.flush()  # the job row first: its history record refers to it (no ORM relationship orders them)
    session.add(first)
    session.flush()


def request_cancel(session: Session, job_id: str, now: Seconds) -> JobRow | None:
    """Mark a cancellation; returns the job, or None when it does not exist. Cancelling twice is harmless."""
    job = session.get(JobRow, job_id)
    if job is None:
        return None
    if job.cancel_requested_at is None and job.state in ACTIVE:
        job.cancel_requested_at = now
    return job
