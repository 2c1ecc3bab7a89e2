"""Budget balances kept as running sums.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Owns: the table budget_balances matching allotment.store.tables.BudgetBalanceRow (each budget's balance and
spending in each period), filled from the ledger entries already there. Every cycle read each budget's balance by
summing all of the period's ledger entries: about 1 µs per entry on SQLite, so a cycle slowed by a second per
million entries (≈ a week of 5-minute charges at Ai2 scale). accounts.post() now moves both sums with each entry.
Must not: be edited once released; later schema changes get their own revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "budget_balances",
        sa.Column("period_id", sa.String(length=200), nullable=False),
        sa.Column("budget", sa.String(length=200), nullable=False),
        sa.Column("balance_micro", sa.BigInteger(), nullable=False),
        sa.Column("spent_micro", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["budget"], ["budgets.name"], name=op.f("fk_budget_balances_budget_budgets")),
        sa.ForeignKeyConstraint(["period_id"], ["periods.id"], name=op.f("fk_budget_balances_period_id_periods")),
        sa.PrimaryKeyConstraint("period_id", "budget", name=op.f("pk_budget_balances")),
    )
    op.execute(
        "INSERT INTO budget_balances (period_id, budget, balance_micro, spent_micro) "
        "SELECT period_id, budget, SUM(amount_micro), "
        "-SUM(CASE WHEN kind IN ('charge', 'refund') THEN amount_micro ELSE 0 END) "
        "FROM ledger_entries GROUP BY period_id, budget"
    )


def downgrade() -> None:
    op.drop_table("budget_balances")
