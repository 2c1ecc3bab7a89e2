"""Jobs report their checkpoints: the columns runs.checkpoint_at and runs.checkpoint_every.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07

Owns: the columns runs.checkpoint_at and runs.checkpoint_every matching allotment.store.tables.RunRow: when the run's
job last reported a saved checkpoint (the CHECKPOINTED executor event) and the seconds between its last two reports,
NULL for never, which is what every row already there gets; the scheduler's rule `least-lost-work` reads them.
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("checkpoint_at", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("checkpoint_every", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("checkpoint_every")
        batch.drop_column("checkpoint_at")
