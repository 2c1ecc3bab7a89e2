"""Jobs can be tasks of a job array: the columns jobs.array_id, jobs.array_index and jobs.array_limit.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

Owns: the columns matching allotment.store.tables.JobRow: array_id (the array a task belongs to, indexed: cancel,
hold, release and the array's view select its tasks by it), array_index (the task's index) and array_limit (`%N`,
the most tasks of the array run at once: allotment.changes.eligibility), all NULL for a plain job, which is what
every row already there gets.
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("array_id", sa.String(200), nullable=True))
        batch.add_column(sa.Column("array_index", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("array_limit", sa.Integer(), nullable=True))
        batch.create_index("ix_jobs_array_id", ["array_id"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_array_id")
        batch.drop_column("array_limit")
        batch.drop_column("array_index")
        batch.drop_column("array_id")
