"""Jobs ask for CPUs and memory per replica, and nodes declare what they offer.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04

Owns: the columns jobs.cpus, jobs.memory_mib, nodes.cpus and nodes.memory_mib matching
allotment.store.tables.JobRow and NodeRow; 0 (what the rows already there get) means no request on a job and not
declared on a node, so placement counts nothing for them (docs/decisions/0060-cpus-and-memory-beside-gpus.md).
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS: tuple[tuple[str, str, sa.types.TypeEngine[int]], ...] = (
    ("jobs", "cpus", sa.Integer()),
    ("jobs", "memory_mib", sa.BigInteger()),
    ("nodes", "cpus", sa.Integer()),
    ("nodes", "memory_mib", sa.BigInteger()),
)


def upgrade() -> None:
    # the server default fills the rows already there; the application writes the columns itself afterwards
    for table, column, kind in _COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column(column, kind, server_default=sa.text("0"), nullable=False))
    for table, column, _ in _COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, server_default=None)


def downgrade() -> None:
    for table, column, _ in reversed(_COLUMNS):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
