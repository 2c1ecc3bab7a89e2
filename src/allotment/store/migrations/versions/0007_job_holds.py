"""Jobs can be held: the column jobs.hold.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04

Owns: the column jobs.hold matching allotment.store.tables.JobRow: "user" or "admin" while a pending job is held
(scontrol hold; allotment.changes.eligibility keeps it from the scheduler), NULL otherwise, which is what every row
already there gets.
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("hold", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("hold")
