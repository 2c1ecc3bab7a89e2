"""The database schema as typed SQLAlchemy 2.0 declarative classes.

Owns: every table of Allotment's state (fleet, budgets, periods, jobs and their runs, slices, windows,
reservations, the ledger, fair-share usage, the launch/terminate outbox, the audit log and engine key/values)
and their keys, constraints and indexes. Alembic's migrations must reproduce exactly this metadata.

Must not: hold behaviour. Times are integer Unix seconds (BIGINT), money is BIGINT credit-microunits, and
structured values (argv, labels, placements) are JSON.
"""

from __future__ import annotations

from typing import Annotated, Any

from sqlalchemy import JSON, BigInteger, Double, ForeignKey, Index, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from allotment.changes.dependency import MAX_DEPENDENCY_CHARS

Time = Annotated[int, mapped_column(BigInteger)]
Money = Annotated[int, mapped_column(BigInteger)]
Name = Annotated[str, mapped_column(String(200))]
Json = Annotated[Any, mapped_column(JSON)]

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class ClusterRow(Base):
    __tablename__ = "clusters"
    name: Mapped[Name] = mapped_column(primary_key=True)
    topology: Mapped[Json]
    """Topology label keys from the tightest level to the loosest."""


class NodeRow(Base):
    __tablename__ = "nodes"
    name: Mapped[Name] = mapped_column(primary_key=True)
    cluster: Mapped[Name] = mapped_column(ForeignKey("clusters.name"), index=True)
    gpu_type: Mapped[Name]
    gpus: Mapped[int]
    labels: Mapped[Json]
    state: Mapped[Name]
    forced: Mapped[bool]
    reason: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[Time]
    cpus: Mapped[int] = mapped_column(default=0)
    """CPUs the node offers to jobs; 0: not declared (decision 60)."""
    memory_mib: Mapped[int] = mapped_column(BigInteger, default=0)
    """MiB of memory the node offers to jobs; 0: not declared."""


class BudgetRow(Base):
    __tablename__ = "budgets"
    name: Mapped[Name] = mapped_column(primary_key=True)
    parent: Mapped[Name | None] = mapped_column(ForeignKey("budgets.name"), index=True)
    allocation_micro: Mapped[Money]
    max_gpus: Mapped[int | None]
    updated_at: Mapped[Time]


class UserRow(Base):
    __tablename__ = "users"
    name: Mapped[Name] = mapped_column(primary_key=True)
    admin: Mapped[bool]


class MembershipRow(Base):
    __tablename__ = "memberships"
    budget: Mapped[Name] = mapped_column(ForeignKey("budgets.name"), primary_key=True)
    user: Mapped[Name] = mapped_column(ForeignKey("users.name"), primary_key=True, index=True)
    role: Mapped[Name]


class PeriodRow(Base):
    __tablename__ = "periods"
    id: Mapped[Name] = mapped_column(primary_key=True)
    start: Mapped[Time] = mapped_column(unique=True)
    end: Mapped[Time]
    closed: Mapped[bool]


class WindowRow(Base):
    __tablename__ = "windows"
    id: Mapped[Name] = mapped_column(primary_key=True)
    budget: Mapped[Name] = mapped_column(ForeignKey("budgets.name"), index=True)
    cluster: Mapped[Name] = mapped_column(ForeignKey("clusters.name"))
    gpu_type: Mapped[Name]
    gpus: Mapped[int]
    start: Mapped[Time]
    end: Mapped[Time]


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (Index(None, "state", "budget"), Index(None, "submitted_at", "id"))
    id: Mapped[Name] = mapped_column(primary_key=True)
    request_id: Mapped[Name | None] = mapped_column(unique=True)
    """The client's idempotency key for the submission: a retried submit finds the job it created."""
    budget: Mapped[Name] = mapped_column(ForeignKey("budgets.name"))
    user: Mapped[Name] = mapped_column(ForeignKey("users.name"), index=True)
    name: Mapped[Name]
    spec: Mapped[Json]
    """What to run: {"command": [argv…], "env": {…}, "image": str | null, "workdir": str | null}."""
    gpus: Mapped[int]
    replicas: Mapped[int]
    kind: Mapped[Name]
    contract: Mapped[Name]
    slice_seconds: Mapped[Time]
    priority: Mapped[int]
    grace: Mapped[Time]
    max_runtime: Mapped[Time | None]
    gpu_types: Mapped[Json]
    clusters: Mapped[Json]
    fallback_opportunistic: Mapped[bool]
    requeue: Mapped[bool]
    submitted_at: Mapped[Time]
    state: Mapped[Name]
    """pending | running | preempting | completed | failed | cancelled | lost"""
    attempt: Mapped[int]
    state_reason: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[Time]
    cancel_requested_at: Mapped[Time | None]
    """Set by a user's cancellation; the engine acts on it in its next cycle."""
    cpus: Mapped[int] = mapped_column(default=0)
    """CPUs per replica; 0: no request (decision 60)."""
    memory_mib: Mapped[int] = mapped_column(BigInteger, default=0)
    """MiB of memory per replica; 0: no request."""
    hold: Mapped[Name | None] = mapped_column(default=None)
    """user | admin while the job is held (scontrol hold; changes.eligibility keeps it from the scheduler); None
    otherwise."""
    revision: Mapped[int] = mapped_column(default=0)
    """0 at submission, one more with each update of what the pending job asks for (service.jobedit): the engine's
    snapshot cache reads the job again when it changed (changes.snapshot)."""
    requeue_attempt: Mapped[int | None] = mapped_column(default=None)
    """The job's attempt (as this column counts them) when a requeue was asked: the run then open is stopped and the
    job put back in the queue (scontrol requeue); a later attempt no longer matches, so the request never outlives
    its run."""
    requeues: Mapped[int] = mapped_column(default=0)
    """How many requeues were asked (scontrol's Restarts)."""
    array_id: Mapped[Name | None] = mapped_column(default=None, index=True)
    """The job array this job is a task of (`a-<hex>`; its id is `<array_id>_<array_index>`), None for a plain job."""
    array_index: Mapped[int | None] = mapped_column(default=None)
    """The task's index in its array (ALLOT_ARRAY_INDEX)."""
    array_limit: Mapped[int | None] = mapped_column(default=None)
    """The most tasks of its array that may run at once (`%N`; changes.eligibility), None: no limit."""
    dependency: Mapped[str | None] = mapped_column(String(MAX_DEPENDENCY_CHARS), default=None)
    """What the job waits for before it may start, in canonical sbatch --dependency text (changes.dependency), e.g.
    `afterok:j-1:j-2,singleton`; None: nothing. changes.eligibility keeps it from the scheduler until satisfied."""


class JobEventRow(Base):
    __tablename__ = "job_events"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[Name] = mapped_column(ForeignKey("jobs.id"), index=True)
    at: Mapped[Time]
    from_state: Mapped[Name | None]
    to_state: Mapped[Name]
    reason: Mapped[str] = mapped_column(Text)


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (Index(None, "job_id", "attempt", unique=True),)
    id: Mapped[Name] = mapped_column(primary_key=True)
    job_id: Mapped[Name] = mapped_column(ForeignKey("jobs.id"))
    attempt: Mapped[int]
    started_at: Mapped[Time]
    placement: Mapped[Json]
    """[{"node": str, "gpus": [int…]}…]"""
    run_class: Mapped[Name]
    slice_end: Mapped[Time | None]
    ended_at: Mapped[Time | None] = mapped_column(index=True)
    exit_code: Mapped[int | None]
    end_reason: Mapped[str | None] = mapped_column(Text)
    rate_micro: Mapped[Money]
    """Credit-microunits per hour at full price for this placement (Σ GPUs × rate of their type)."""
    price: Mapped[int]
    """Per-mille price of the current run class."""
    price_since: Mapped[Time]
    """Start of the current price segment: the run's start, or when its class last changed."""
    charged_until: Mapped[Time]
    signalled_at: Mapped[Time | None]
    kill_at: Mapped[Time | None]
    preempt_reason: Mapped[Name | None]
    preemptor: Mapped[Name | None]
    requeue: Mapped[bool | None]
    """Set with the preemption: whether the job goes back to the queue when this run ends."""
    idle_since: Mapped[Time | None]
    backfill_for: Mapped[Name | None]
    """The job whose planned start this run was placed around (it gives way to that plan)."""
    confirmed_at: Mapped[Time | None]
    """When the executor reported the run's processes running."""
    checkpoint_at: Mapped[Time | None]
    """When the job last reported a saved checkpoint in this run (rule `least-lost-work`)."""
    checkpoint_every: Mapped[Time | None]
    """Seconds between its last two reports (the first: since the run started)."""


class SliceRow(Base):
    __tablename__ = "slices"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    run_id: Mapped[Name] = mapped_column(ForeignKey("runs.id"), index=True)
    job_id: Mapped[Name] = mapped_column(ForeignKey("jobs.id"))
    start: Mapped[Time]
    end: Mapped[Time]
    kind: Mapped[Name]
    """grant | renew"""


class ReservationRow(Base):
    __tablename__ = "reservations"
    job_id: Mapped[Name] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    nodes: Mapped[Json]
    """[[node, gpus]…]"""
    planned_start: Mapped[Time]
    kind: Mapped[Name]
    since: Mapped[Time]
    """When the reservation was first made (core.model.Reservation.since)."""
    gave_way: Mapped[Json] = mapped_column(JSON, default=list)
    """[job…]: running jobs that gave way to it when it was made (core.model.Reservation.gave_way)."""


class LedgerEntryRow(Base):
    """Append-only. job_id and run_id are references, not foreign keys: the ledger outlives job rows."""

    __tablename__ = "ledger_entries"
    __table_args__ = (Index(None, "period_id", "budget"), Index(None, "kind", "at"))
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    period_id: Mapped[Name] = mapped_column(ForeignKey("periods.id"))
    budget: Mapped[Name] = mapped_column(ForeignKey("budgets.name"))
    kind: Mapped[Name]
    amount_micro: Mapped[Money]
    at: Mapped[Time]
    job_id: Mapped[Name | None]
    run_id: Mapped[Name | None] = mapped_column(index=True)
    idempotency_key: Mapped[str] = mapped_column(String(400), unique=True)
    memo: Mapped[str] = mapped_column(Text)


class BudgetBalanceRow(Base):
    """Each budget's balance in a period: the sum of its ledger entries there, kept by accounts.post() in the same
    transaction as the entries (so a cycle reads one row per budget, not every entry of the period)."""

    __tablename__ = "budget_balances"
    period_id: Mapped[Name] = mapped_column(ForeignKey("periods.id"), primary_key=True)
    budget: Mapped[Name] = mapped_column(ForeignKey("budgets.name"), primary_key=True)
    balance_micro: Mapped[Money]
    spent_micro: Mapped[Money]
    """What charges and refunds took from it: the negated sum of its charge and refund entries."""


class BudgetUsageRow(Base):
    __tablename__ = "budget_usage"
    budget: Mapped[Name] = mapped_column(ForeignKey("budgets.name"), primary_key=True)
    usage: Mapped[float] = mapped_column(Double)
    """Decayed usage in credits at full price, as of `as_of`."""
    as_of: Mapped[Time]


class IntentRow(Base):
    """The outbox: launch and terminate orders written in the cycle's transaction, delivered after it
    commits."""

    __tablename__ = "intents"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[Name] = mapped_column(ForeignKey("jobs.id"), index=True)
    run_id: Mapped[Name | None]
    attempt: Mapped[int]
    kind: Mapped[Name]
    """launch | terminate"""
    payload: Mapped[Json]
    created_at: Mapped[Time]
    delivered_at: Mapped[Time | None] = mapped_column(index=True)


class AuditRow(Base):
    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[Time] = mapped_column(index=True)
    actor: Mapped[Name]
    action: Mapped[Name]
    target: Mapped[Name]
    detail: Mapped[Json]
    why: Mapped[str] = mapped_column(Text)


class EngineStateRow(Base):
    __tablename__ = "engine_state"
    key: Mapped[Name] = mapped_column(primary_key=True)
    value: Mapped[Json]


class PendingReasonRow(Base):
    """Why each pending job waits, as the engine's last cycle explained it (promise 10). Rewritten only when the
    reason changes."""

    __tablename__ = "pending_reasons"
    job_id: Mapped[Name] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    blocker: Mapped[Name]
    message: Mapped[str] = mapped_column(Text)
    needed_gpus: Mapped[int]
    free_gpus: Mapped[int]
    estimated_start: Mapped[Time | None]
    hints: Mapped[Json]
    at: Mapped[Time]


class ApiTokenRow(Base):
    """A bearer token of the HTTP API. Only the SHA-256 of the secret is kept; the secret is shown once."""

    __tablename__ = "api_tokens"
    id: Mapped[Name] = mapped_column(primary_key=True)
    user: Mapped[Name] = mapped_column(ForeignKey("users.name"), index=True)
    name: Mapped[Name]
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    """Hex SHA-256 of the secret."""
    created_at: Mapped[Time]
    expires_at: Mapped[Time]
    revoked_at: Mapped[Time | None]
    last_used_at: Mapped[Time | None]
