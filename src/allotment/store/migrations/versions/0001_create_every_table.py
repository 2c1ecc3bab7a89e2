"""Create every table of the first schema.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-30

Owns: the initial DDL (tables, keys, indexes) matching allotment.store.tables at its first release.
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("why", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"], unique=False)
    op.create_table(
        "budgets",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("parent", sa.String(length=200), nullable=True),
        sa.Column("allocation_micro", sa.BigInteger(), nullable=False),
        sa.Column("max_gpus", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["parent"], ["budgets.name"], name=op.f("fk_budgets_parent_budgets")),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_budgets")),
    )
    op.create_index(op.f("ix_budgets_parent"), "budgets", ["parent"], unique=False)
    op.create_table(
        "clusters",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("topology", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_clusters")),
    )
    op.create_table(
        "engine_state",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_engine_state")),
    )
    op.create_table(
        "periods",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("start", sa.BigInteger(), nullable=False),
        sa.Column("end", sa.BigInteger(), nullable=False),
        sa.Column("closed", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_periods")),
        sa.UniqueConstraint("start", name=op.f("uq_periods_start")),
    )
    op.create_table(
        "users",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_users")),
    )
    op.create_table(
        "budget_usage",
        sa.Column("budget", sa.String(length=200), nullable=False),
        sa.Column("usage", sa.Double(), nullable=False),
        sa.Column("as_of", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["budget"], ["budgets.name"], name=op.f("fk_budget_usage_budget_budgets")),
        sa.PrimaryKeyConstraint("budget", name=op.f("pk_budget_usage")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("request_id", sa.String(length=200), nullable=True),
        sa.Column("budget", sa.String(length=200), nullable=False),
        sa.Column("user", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.Column("contract", sa.String(length=200), nullable=False),
        sa.Column("slice_seconds", sa.BigInteger(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("grace", sa.BigInteger(), nullable=False),
        sa.Column("max_runtime", sa.BigInteger(), nullable=True),
        sa.Column("gpu_types", sa.JSON(), nullable=False),
        sa.Column("clusters", sa.JSON(), nullable=False),
        sa.Column("fallback_opportunistic", sa.Boolean(), nullable=False),
        sa.Column("requeue", sa.Boolean(), nullable=False),
        sa.Column("submitted_at", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=200), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state_reason", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("cancel_requested_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["budget"], ["budgets.name"], name=op.f("fk_jobs_budget_budgets")),
        sa.ForeignKeyConstraint(["user"], ["users.name"], name=op.f("fk_jobs_user_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("request_id", name=op.f("uq_jobs_request_id")),
    )
    op.create_index(op.f("ix_jobs_state_budget"), "jobs", ["state", "budget"], unique=False)
    op.create_index(op.f("ix_jobs_user"), "jobs", ["user"], unique=False)
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("period_id", sa.String(length=200), nullable=False),
        sa.Column("budget", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.Column("amount_micro", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=True),
        sa.Column("run_id", sa.String(length=200), nullable=True),
        sa.Column("idempotency_key", sa.String(length=400), nullable=False),
        sa.Column("memo", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["budget"], ["budgets.name"], name=op.f("fk_ledger_entries_budget_budgets")),
        sa.ForeignKeyConstraint(["period_id"], ["periods.id"], name=op.f("fk_ledger_entries_period_id_periods")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_entries")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_ledger_entries_idempotency_key")),
    )
    op.create_index(op.f("ix_ledger_entries_period_id_budget"), "ledger_entries", ["period_id", "budget"], unique=False)
    op.create_index(op.f("ix_ledger_entries_kind_at"), "ledger_entries", ["kind", "at"], unique=False)
    op.create_index(op.f("ix_ledger_entries_run_id"), "ledger_entries", ["run_id"], unique=False)
    op.create_table(
        "memberships",
        sa.Column("budget", sa.String(length=200), nullable=False),
        sa.Column("user", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["budget"], ["budgets.name"], name=op.f("fk_memberships_budget_budgets")),
        sa.ForeignKeyConstraint(["user"], ["users.name"], name=op.f("fk_memberships_user_users")),
        sa.PrimaryKeyConstraint("budget", "user", name=op.f("pk_memberships")),
    )
    op.create_index(op.f("ix_memberships_user"), "memberships", ["user"], unique=False)
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("cluster", sa.String(length=200), nullable=False),
        sa.Column("gpu_type", sa.String(length=200), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=200), nullable=False),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["cluster"], ["clusters.name"], name=op.f("fk_nodes_cluster_clusters")),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_nodes")),
    )
    op.create_index(op.f("ix_nodes_cluster"), "nodes", ["cluster"], unique=False)
    op.create_table(
        "windows",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("budget", sa.String(length=200), nullable=False),
        sa.Column("cluster", sa.String(length=200), nullable=False),
        sa.Column("gpu_type", sa.String(length=200), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("start", sa.BigInteger(), nullable=False),
        sa.Column("end", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["budget"], ["budgets.name"], name=op.f("fk_windows_budget_budgets")),
        sa.ForeignKeyConstraint(["cluster"], ["clusters.name"], name=op.f("fk_windows_cluster_clusters")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_windows")),
    )
    op.create_index(op.f("ix_windows_budget"), "windows", ["budget"], unique=False)
    op.create_table(
        "intents",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("delivered_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_intents_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_intents")),
    )
    op.create_index(op.f("ix_intents_delivered_at"), "intents", ["delivered_at"], unique=False)
    op.create_index(op.f("ix_intents_job_id"), "intents", ["job_id"], unique=False)
    op.create_table(
        "job_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("from_state", sa.String(length=200), nullable=True),
        sa.Column("to_state", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_events_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_events")),
    )
    op.create_index(op.f("ix_job_events_job_id"), "job_events", ["job_id"], unique=False)
    op.create_table(
        "reservations",
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("nodes", sa.JSON(), nullable=False),
        sa.Column("planned_start", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_reservations_job_id_jobs")),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_reservations")),
    )
    op.create_table(
        "pending_reasons",
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("blocker", sa.String(length=200), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("needed_gpus", sa.Integer(), nullable=False),
        sa.Column("free_gpus", sa.Integer(), nullable=False),
        sa.Column("estimated_start", sa.BigInteger(), nullable=True),
        sa.Column("hints", sa.JSON(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_pending_reasons_job_id_jobs")),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_pending_reasons")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("run_class", sa.String(length=200), nullable=False),
        sa.Column("slice_end", sa.BigInteger(), nullable=True),
        sa.Column("ended_at", sa.BigInteger(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("end_reason", sa.Text(), nullable=True),
        sa.Column("rate_micro", sa.BigInteger(), nullable=False),
        sa.Column("price", sa.Integer(), nullable=False),
        sa.Column("price_since", sa.BigInteger(), nullable=False),
        sa.Column("charged_until", sa.BigInteger(), nullable=False),
        sa.Column("signalled_at", sa.BigInteger(), nullable=True),
        sa.Column("kill_at", sa.BigInteger(), nullable=True),
        sa.Column("preempt_reason", sa.String(length=200), nullable=True),
        sa.Column("preemptor", sa.String(length=200), nullable=True),
        sa.Column("requeue", sa.Boolean(), nullable=True),
        sa.Column("idle_since", sa.BigInteger(), nullable=True),
        sa.Column("backfill_for", sa.String(length=200), nullable=True),
        sa.Column("confirmed_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_runs_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_ended_at"), "runs", ["ended_at"], unique=False)
    op.create_index(op.f("ix_runs_job_id_attempt"), "runs", ["job_id", "attempt"], unique=True)
    op.create_table(
        "slices",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("job_id", sa.String(length=200), nullable=False),
        sa.Column("start", sa.BigInteger(), nullable=False),
        sa.Column("end", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_slices_job_id_jobs")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_slices_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slices")),
    )
    op.create_index(op.f("ix_slices_run_id"), "slices", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_slices_run_id"), table_name="slices")
    op.drop_table("slices")
    op.drop_table("pending_reasons")
    op.drop_index(op.f("ix_runs_job_id_attempt"), table_name="runs")
    op.drop_index(op.f("ix_runs_ended_at"), table_name="runs")
    op.drop_table("runs")
    op.drop_table("reservations")
    op.drop_index(op.f("ix_job_events_job_id"), table_name="job_events")
    op.drop_table("job_events")
    op.drop_index(op.f("ix_intents_job_id"), table_name="intents")
    op.drop_index(op.f("ix_intents_delivered_at"), table_name="intents")
    op.drop_table("intents")
    op.drop_index(op.f("ix_windows_budget"), table_name="windows")
    op.drop_table("windows")
    op.drop_index(op.f("ix_nodes_cluster"), table_name="nodes")
    op.drop_table("nodes")
    op.drop_index(op.f("ix_memberships_user"), table_name="memberships")
    op.drop_table("memberships")
    op.drop_index(op.f("ix_ledger_entries_run_id"), table_name="ledger_entries")
    op.drop_index(op.f("ix_ledger_entries_kind_at"), table_name="ledger_entries")
    op.drop_index(op.f("ix_ledger_entries_period_id_budget"), table_name="ledger_entries")
    op.drop_table("ledger_entries")
    op.drop_index(op.f("ix_jobs_user"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_state_budget"), table_name="jobs")
    op.drop_table("jobs")
    op.drop_table("budget_usage")
    op.drop_table("users")
    op.drop_table("periods")
    op.drop_table("engine_state")
    op.drop_table("clusters")
    op.drop_index(op.f("ix_budgets_parent"), table_name="budgets")
    op.drop_table("budgets")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")
    op.drop_table("audit_log")
