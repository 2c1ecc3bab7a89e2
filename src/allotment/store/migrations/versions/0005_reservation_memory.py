"""Reservations remember which running jobs gave way to them when they were made.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Owns: the column reservations.gave_way matching allotment.store.tables.ReservationRow (a JSON list of job ids,
empty for reservations made before it): a carried planned start keeps counting those jobs as leaving for it even
after the fair-share standings move (promise 8; docs/decisions/0043-a-plan-is-kept-and-leaves-the-session-room.md).
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # the server default fills the rows already there; the application writes the column itself afterwards
    with op.batch_alter_table("reservations") as batch:
        batch.add_column(sa.Column("gave_way", sa.JSON(), server_default=sa.text("'[]'"), nullable=False))
    with op.batch_alter_table("reservations") as batch:
        batch.alter_column("gave_way", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("reservations") as batch:
        batch.drop_column("gave_way")
