"""Writing users' requests: submissions and cancellations (the engine acts on them in its next cycle).

Owns: inserting a job in the pending state with its first history record, idempotently per client request id
(one at a time, or a batch with one statement per table: `submit_many`), and marking a cancellation request.
Must not: start, stop or place anything (the engine is the single writer of scheduling state).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from allotment.core.jobstate import ACTIVE, JobState
from allotment.core.model import ContractClass, JobKind, Seconds
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
    per table writes the new jobs and their first history records. A request id repeated inside the batch returns
    the job its first use created. A concurrent transaction that inserts one of the same request ids first makes
    this one fail with IntegrityError (the caller retries the batch one submission at a time)."""
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
        values = job_values(sub, now)
        job = NewJob(**values)
        if sub.request_id is not None:
            known[sub.request_id] = job
        new_jobs.append(values)
        out.append((job, True))
    if new_jobs:  # core INSERTs, one per table: no unit of work to track hundreds of objects
        session.flush()
        session.execute(insert(JobRow), new_jobs)
        session.execute(
            insert(JobEventRow),
            [
                {
                    "job_id": v["id"],
                    "at": now,
                    "from_state": None,
                    "to_state": JobState.PENDING.value,
                    "reason": "submitted",
                }
                for v in new_jobs
            ],
        )
    return out


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
