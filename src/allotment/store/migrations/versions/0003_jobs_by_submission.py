"""Index jobs by submission time, newest first, for the job listing.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Owns: the index (submitted_at, id) on jobs matching allotment.store.tables.JobRow: `GET /jobs` pages newest
first by (submitted_at, id), which without it sorted every job ever submitted on each request (its cost grew with
the table; under load the listing was the API's most expensive request).
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_jobs_submitted_at_id"), "jobs", ["submitted_at", "id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_jobs_submitted_at_id"), table_name="jobs")
