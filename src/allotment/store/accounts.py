"""Ledger persistence: posting entries exactly once, periods and their opening, and balances.

Owns: post() (idempotent by key, safe under concurrency: INSERT … ON CONFLICT DO NOTHING on both databases),
the periods table (which period an entry belongs to, opening a period with its allocations and carry-overs,
closing the one before), and balances per budget and period, per leaf and rolled up the budget tree. Balances are
kept in budget_balances, moved by every new entry in the entry's own transaction: the amounts are gathered per
transaction and added just before it commits, in (period, budget) order, so two transactions never lock two
balances in opposite orders; a read of balances in the same transaction adds them first.

Must not: compute charges, refunds or period boundaries itself (allotment.ledger does), or update or delete a
ledger entry: the ledger is append-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Select, bindparam, event, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from allotment.core.model import Budget, Micro, Seconds
from allotment.ledger import (
    Entry,
    EntryKind,
    Period,
    PeriodSpec,
    Rollover,
    period_at,
    rollup,
)
from allotment.ledger.periods import period_opening
from allotment.store.errors import ClosedPeriodError, NoOpenPeriodError
from allotment.store.tables import BudgetBalanceRow, BudgetRow, LedgerEntryRow, PeriodRow

NO_CARRY = Rollover()


def dialect_insert(session: Session) -> type[postgresql.Insert] | type[sqlite.Insert]:
    """The INSERT construct of the session's dialect (both have ON CONFLICT DO NOTHING / DO UPDATE)."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.Insert
    if name == "sqlite":
        return sqlite.Insert
    raise ValueError(f"unsupported dialect {name}")


def post(session: Session, entry: Entry) -> bool:
    """Record `entry` unless an entry with its idempotency key exists. Returns whether it was new.

    Two transactions posting the same key at once record it once: on PostgreSQL the second waits on the unique
    index and then does nothing; on SQLite writers are serialised. Posting into a closed period raises
    ClosedPeriodError (a retry of an entry already there returns False)."""
    if session.in_nested_transaction():
        # the balance moves are gathered per transaction: a savepoint rolled back would leave them counted
        raise ValueError(f"post({entry.key}) inside a savepoint: post ledger entries in the outer transaction")
    conn = periods_connection(session)
    closed = conn.execute(_PERIOD_CLOSED, {"period_id": entry.period_id}).first()
    if closed is None:
        raise NoOpenPeriodError(f"period {entry.period_id} does not exist")
    if closed[0]:
        exists = conn.execute(_ENTRY_BY_KEY, {"key": entry.key}).first()
        if exists is not None:
            return False
        raise ClosedPeriodError(f"period {entry.period_id} is closed; cannot post {entry.key}")
    row = {
        "period_id": entry.period_id,
        "budget": entry.budget,
        "kind": entry.kind.value,
        "amount_micro": entry.amount,
        "at": entry.at,
        "job_id": entry.job_id,
        "run_id": entry.run_id,
        "idempotency_key": entry.key,
        "memo": entry.memo,
    }
    if conn.execute(_insert_entry(session), row).first() is None:
        return False
    moves: dict[tuple[str, str], tuple[Micro, Micro]] = session.info.setdefault(_MOVES, {})
    key = (entry.period_id, entry.budget)
    balance, spent = moves.get(key, (0, 0))
    moves[key] = (balance + entry.amount, spent - entry.amount if entry.kind in SPENDING else spent)
    return True


def periods_connection(session: Session) -> Connection:
    """The session's connection, for plain Core reads of periods and writes of entries: no autoflush of the caller's
    unrelated ORM changes (a run's charged_until, a job's state) before every entry — they are written together at
    the next flush. Only a period opened or closed through the ORM in this transaction is written first, so that
    what is read about periods is current."""
    if any(isinstance(o, PeriodRow) for o in session.new) or any(isinstance(o, PeriodRow) for o in session.dirty):
        session.flush()
    return session.connection()


_PERIOD_CLOSED = select(PeriodRow.closed).where(PeriodRow.id == bindparam("period_id")).with_for_update(read=True)
"""Whether an entry's period is closed, under a shared lock on its row (closing the period waits for the posting
transaction, and a post waits for a closing one)."""
_ENTRY_BY_KEY = select(LedgerEntryRow.id).where(LedgerEntryRow.idempotency_key == bindparam("key"))

_INSERT_ENTRY: dict[str, Any] = {}


def _insert_entry(session: Session) -> Any:
    """The entry insert of the session's dialect, built once (its rows come as parameters): ON CONFLICT on the
    idempotency key does nothing and returns no id."""
    dialect = session.get_bind().dialect.name
    stmt = _INSERT_ENTRY.get(dialect)
    if stmt is None:
        stmt = _INSERT_ENTRY[dialect] = (
            dialect_insert(session)(LedgerEntryRow)
            .on_conflict_do_nothing(index_elements=["idempotency_key"])
            .returning(LedgerEntryRow.id)
        )
    return stmt


_MOVES = "allotment.balance_moves"
"""session.info key: what this transaction's new entries add to each (period, budget) balance and spending, not
yet written."""

SPENDING = frozenset({EntryKind.CHARGE, EntryKind.REFUND})
"""The kinds of entry that count as spending (charges less refunds)."""


def write_balance_moves(session: Session) -> None:
    """Add this transaction's new entries to budget_balances, in (period, budget) order."""
    moves: dict[tuple[str, str], tuple[Micro, Micro]] | None = session.info.pop(_MOVES, None)
    if not moves:
        return
    dialect = session.get_bind().dialect.name
    stmt = _MOVE_BALANCE.get(dialect)
    if stmt is None:  # built once per dialect: every transaction that posts entries runs it
        insert = dialect_insert(session)(BudgetBalanceRow)
        stmt = _MOVE_BALANCE[dialect] = insert.on_conflict_do_update(
            index_elements=["period_id", "budget"],
            set_={
                "balance_micro": BudgetBalanceRow.balance_micro + insert.excluded.balance_micro,
                "spent_micro": BudgetBalanceRow.spent_micro + insert.excluded.spent_micro,
            },
        )
    rows = [
        {"period_id": period_id, "budget": budget, "balance_micro": amount, "spent_micro": spent}
        for (period_id, budget), (amount, spent) in sorted(moves.items())
    ]
    session.connection().execute(stmt, rows)  # one executemany, in (period, budget) order


_MOVE_BALANCE: dict[str, Any] = {}


@event.listens_for(Session, "before_commit")
def _before_commit(session: Session) -> None:
    write_balance_moves(session)


@event.listens_for(Session, "after_rollback")
def _after_rollback(session: Session) -> None:
    session.info.pop(_MOVES, None)  # the entries were rolled back with the transaction


def post_all(session: Session, entries: Iterable[Entry]) -> int:
    """Post each entry; returns how many were new."""
    return sum(post(session, e) for e in entries)


def ensure_period(session: Session, period: Period) -> PeriodRow:
    """The row of `period`, created (open) if absent."""
    stmt = (
        dialect_insert(session)(PeriodRow)
        .values(id=period.id, start=period.start, end=period.end, closed=False)
        .on_conflict_do_nothing(index_elements=["id"])
    )
    session.execute(stmt)
    row = session.get(PeriodRow, period.id, populate_existing=True)
    if row is None or (row.start, row.end) != (period.start, period.end):
        raise ValueError(f"period {period.id} exists with other bounds; the period calendar changed")
    return row


def posting_period(session: Session, at: Seconds) -> str:
    """The period an entry at instant `at` belongs to: the open period holding `at` or, when that one is
    already closed, the earliest open period after it."""
    found = periods_connection(session).scalar(_POSTING_PERIOD, {"at": at})
    if found is None:
        raise NoOpenPeriodError(f"no open period holds or follows {at}")
    return str(found)


_POSTING_PERIOD = (
    select(PeriodRow.id)
    .where(PeriodRow.end > bindparam("at"), PeriodRow.closed.is_(False))
    .order_by(PeriodRow.start)
    .limit(1)
)


def budget_tree(session: Session) -> list[Budget]:
    rows = session.scalars(select(BudgetRow).order_by(BudgetRow.name))
    return [Budget(r.name, r.parent, r.allocation_micro, r.max_gpus) for r in rows]


def balances(session: Session, period_id: str) -> dict[str, Micro]:
    """Each budget's own balance in the period (the sum of its entries, read from budget_balances); budgets
    without entries are absent."""
    return _kept(session, period_id, _BALANCES)


def spending(session: Session, period_id: str) -> dict[str, Micro]:
    """Each budget's own spending in the period (charges less refunds, as a positive amount, read from
    budget_balances); budgets without entries are absent."""
    return _kept(session, period_id, _SPENDING)


def _kept(session: Session, period_id: str, stmt: Select[str, int]) -> dict[str, Micro]:
    write_balance_moves(session)
    session.flush()  # read with Core on the session's connection: the ORM's pending changes first
    rows = session.connection().execute(stmt, {"period_id": period_id})
    return {budget: int(total) for budget, total in rows}


# each cycle reads the balances: built once
_BALANCES = select(BudgetBalanceRow.budget, BudgetBalanceRow.balance_micro).where(
    BudgetBalanceRow.period_id == bindparam("period_id")
)
_SPENDING = select(BudgetBalanceRow.budget, BudgetBalanceRow.spent_micro).where(
    BudgetBalanceRow.period_id == bindparam("period_id")
)


def summed_balances(session: Session, period_id: str) -> dict[str, Micro]:
    """balances() summed from the ledger entries themselves (for checks: it reads every entry of the period)."""
    return _summed(session, period_id)


def summed_spending(session: Session, period_id: str) -> dict[str, Micro]:
    """spending() summed from the ledger entries themselves (for checks: it reads every entry of the period)."""
    return {budget: -total for budget, total in _summed(session, period_id, SPENDING).items()}


def _summed(session: Session, period_id: str, kinds: Iterable[EntryKind] | None = None) -> dict[str, Micro]:
    stmt = select(LedgerEntryRow.budget, func.sum(LedgerEntryRow.amount_micro)).where(
        LedgerEntryRow.period_id == period_id
    )
    if kinds is not None:
        stmt = stmt.where(LedgerEntryRow.kind.in_(sorted(k.value for k in kinds)))
    return {budget: int(total) for budget, total in session.execute(stmt.group_by(LedgerEntryRow.budget))}


def rolled_up(session: Session, period_id: str) -> dict[str, Micro]:
    """Every budget's balance including its whole subtree (a leaf's is its own)."""
    parents = {b.name: b.parent for b in budget_tree(session)}
    return rollup(balances(session, period_id), parents)


def open_period(session: Session, spec: PeriodSpec, at: Seconds, rollover: Rollover = NO_CARRY) -> Period:
    """Make sure the period holding `at` is open and funded: create it, close the period before it, and
    post each leaf budget's allocation and (where `rollover` allows) carry-over. Idempotent: calling it
    again, or from two processes at once, posts nothing twice: the previous period's row is locked while
    its closing balances are read, and post() takes a shared lock on an entry's period, so no entry slips
    into it after closing. Allocations are the budgets' current allocation_micro."""
    period = period_at(spec, at)
    ensure_period(session, period)
    previous = session.scalars(
        select(PeriodRow)
        .where(PeriodRow.start < period.start)
        .order_by(PeriodRow.start.desc())
        .limit(1)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).first()
    closing: dict[str, Micro] = {}
    if previous is not None:
        closing = balances(session, previous.id)
        previous.closed = True
    post_all(session, period_opening(period, budget_tree(session), closing, rollover))
    session.flush()
    return period


def close_period(session: Session, period_id: str) -> None:
    row = session.get(PeriodRow, period_id)
    if row is None:
        raise NoOpenPeriodError(f"period {period_id} does not exist")
    row.closed = True
    session.flush()


def periods(session: Session) -> list[PeriodRow]:
    return list(session.scalars(select(PeriodRow).order_by(PeriodRow.start)))
