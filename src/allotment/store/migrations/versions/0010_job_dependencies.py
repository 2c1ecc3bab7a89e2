"""Jobs can depend on other jobs: the column jobs.dependency.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

Owns: the column jobs.dependency matching allotment.store.tables.JobRow: the canonical sbatch --dependency text a
job waits for (allotment.changes.dependency; changes.eligibility keeps the job from the scheduler until it holds),
NULL for none, which is what every row already there gets.
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("dependency", sa.String(4000), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("dependency")
