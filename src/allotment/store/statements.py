"""Ledger entries read as statements: a budget subtree's entries page by page (newest first, by ledger id) and the
GPUs each run held, for the charge lines of service/charges.py.

Must not: write anything, or coalesce or price entries (service/charges.py and allotment.ledger do).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.store.tables import LedgerEntryRow, RunRow


def subtree_entries(
    session: Session, budgets: Collection[str], *, before: int | None, limit: int
) -> list[LedgerEntryRow]:
    """Up to `limit` entries of `budgets`, newest first, with ids below `before` (all when None)."""
    stmt = (
        select(LedgerEntryRow)
        .where(LedgerEntryRow.budget.in_(list(budgets)))
        .order_by(LedgerEntryRow.id.desc())
        .limit(limit)
    )
    if before is not None:
        stmt = stmt.where(LedgerEntryRow.id < before)
    return list(session.scalars(stmt))


def run_gpus(session: Session, run_ids: Iterable[str]) -> dict[str, int]:
    """The GPUs each run's placement holds."""
    wanted = sorted(set(run_ids))
    out: dict[str, int] = {}
    for start in range(0, len(wanted), 500):
        for rid, placement in session.execute(
            select(RunRow.id, RunRow.placement).where(RunRow.id.in_(wanted[start : start + 500]))
        ):
            out[rid] = gpus_of(placement)
    return out


def gpus_of(placement: list[dict[str, object]]) -> int:
    total = 0
    for allocation in placement:
        held = allocation["gpus"]
        total += len(held) if isinstance(held, list) else 0
    return total
