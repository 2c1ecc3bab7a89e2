"""Pending jobs can be updated and running jobs requeued: the columns jobs.revision, jobs.requeue_attempt and
jobs.requeues.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04

Owns: the columns matching allotment.store.tables.JobRow: `revision` (0 at submission, one more with each update of
what a pending job asks for: scontrol update job, service.jobedit; the scheduler's snapshot cache reads a job again
when it changed), `requeue_attempt` (the attempt a requeue was asked of: scontrol requeue; NULL when none) and
`requeues` (how many requeues were asked). Every row already there gets 0, NULL and 0.
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # the server default fills the rows already there; the application writes the columns itself afterwards
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("revision", sa.Integer(), server_default=sa.text("0"), nullable=False))
        batch.add_column(sa.Column("requeue_attempt", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("requeues", sa.Integer(), server_default=sa.text("0"), nullable=False))
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column("revision", server_default=None)
        batch.alter_column("requeues", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("requeues")
        batch.drop_column("requeue_attempt")
        batch.drop_column("revision")
