"""Running balances (budget_balances) on a real database (SQLite and PostgreSQL): whatever is posted, retried, rolled
back or posted concurrently, every budget's kept balance equals the sum of its committed ledger entries, and
posting in opposite budget orders at once never deadlocks."""

from __future__ import annotations

import itertools
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, insert
from sqlalchemy.orm import Session, sessionmaker

from allotment.ledger import Entry, EntryKind, Rollover, adjust_key
from allotment.ledger.periods import WEEK
from allotment.store.accounts import (
    balances,
    open_period,
    post,
    spending,
    summed_balances,
    summed_spending,
)
from allotment.store.migrate import downgrade, upgrade
from allotment.store.tables import LedgerEntryRow

from .conftest import wipe
from .support import H100, T0, WEEKLY, seed_org

LEAVES = ("detect", "segment", "chat")
_batches = itertools.count()


def _entry(budget: str, amount: int, key: str, period_id: str, kind: EntryKind = EntryKind.ADJUSTMENT) -> Entry:
    return Entry(budget, kind, amount, T0 + 1, f"{kind.value}:{adjust_key(budget, key)}", period_id)


def _signed(amount: int, kind: EntryKind) -> int:
    """Charges take from a balance, refunds add to it, adjustments may do either."""
    return {EntryKind.CHARGE: -abs(amount), EntryKind.REFUND: abs(amount)}.get(kind, amount)


Sums = dict[str, dict[str, tuple[int, int]]]


def _both(session: Session, period_ids: list[str]) -> tuple[Sums, Sums]:
    """(kept, summed): per period, each budget's (balance, spending), from budget_balances and from the entries."""

    def pair(balance: dict[str, int], spent: dict[str, int]) -> dict[str, tuple[int, int]]:
        return {b: (balance[b], spent.get(b, 0)) for b in balance}

    kept = {p: pair(balances(session, p), spending(session, p)) for p in period_ids}
    summed = {p: pair(summed_balances(session, p), summed_spending(session, p)) for p in period_ids}
    return kept, summed


post_op = st.tuples(
    st.sampled_from(LEAVES),
    st.integers(-5 * H100, 5 * H100),
    st.integers(0, 7),
    st.sampled_from([EntryKind.ADJUSTMENT, EntryKind.CHARGE, EntryKind.REFUND]),
)
transactions = st.lists(st.tuples(st.lists(post_op, min_size=1, max_size=6), st.booleans()), min_size=1, max_size=8)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(txs=transactions, carry=st.booleans())
def test_kept_balances_equal_the_committed_entries(
    engine: Engine,
    sessions: sessionmaker[Session],
    txs: list[tuple[list[tuple[str, int, int, EntryKind]], bool]],
    carry: bool,
) -> None:
    """Transactions of posts (keys drawn from a few, so many are retries), each committed or rolled back; then,
    half the time, the next period opens with carry-over (it reads the closing balances)."""
    batch = next(_batches)
    try:
        with sessions() as s:
            seed_org(s)
            first = open_period(s, WEEKLY, T0).id
            s.commit()
        for ops, commit in txs:
            with sessions() as s:
                for budget, amount, key, kind in ops:
                    post(
                        s,
                        _entry(
                            budget,
                            _signed(amount, kind),
                            f"b{batch}-k{key}",
                            first,
                            kind,
                        ),
                    )
                if commit:
                    s.commit()
                else:
                    s.rollback()
        ids = [first]
        if carry:
            with sessions() as s:
                ids.append(open_period(s, WEEKLY, T0 + WEEK + 1, Rollover(carry_credit=True)).id)
                s.commit()
        with sessions() as s:
            kept, summed = _both(s, ids)
        assert kept == summed
    finally:
        wipe(engine)


def test_a_read_in_the_posting_transaction_sees_its_own_entries(session: Session) -> None:
    seed_org(session)
    period = open_period(session, WEEKLY, T0)
    session.commit()
    post(session, _entry("chat", -7 * H100, "own", period.id))
    assert balances(session, period.id)["chat"] == (4_000 - 7) * H100  # before the commit, in the same transaction
    session.rollback()
    assert balances(session, period.id)["chat"] == 4_000 * H100
    session.commit()
    kept, summed = _both(session, [period.id])
    assert kept == summed


def test_posting_in_opposite_budget_orders_at_once_neither_deadlocks_nor_loses(
    session: Session, sessions: sessionmaker[Session]
) -> None:
    """Two writers each move two balances per transaction, one in the order detect → chat, the other chat →
    detect (the engine charging runs while an administrator applies a plan). Balances are written at commit in one
    order, so neither waits for the other in a cycle."""
    seed_org(session)
    period = open_period(session, WEEKLY, T0).id
    session.commit()
    rounds = 40
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def writer(name: str, order: tuple[str, str]) -> None:
        try:
            for n in range(rounds):
                barrier.wait()
                with sessions() as s:
                    for budget in order:
                        post(s, _entry(budget, -H100, f"{name}-{n}-{budget}", period))
                    s.commit()
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=writer, args=("one", ("detect", "chat"))),
        threading.Thread(target=writer, args=("two", ("chat", "detect"))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    session.expire_all()
    kept, summed = _both(session, [period])
    assert kept == summed
    assert kept[period]["detect"] == ((3_000 - 2 * rounds) * H100, 0)
    assert kept[period]["chat"] == ((4_000 - 2 * rounds) * H100, 0)


def test_a_savepoint_may_not_post(session: Session) -> None:
    seed_org(session)
    period = open_period(session, WEEKLY, T0).id
    with session.begin_nested(), pytest.raises(ValueError, match="savepoint"):
        post(session, _entry("chat", -H100, "nested", period))


def test_the_migration_fills_balances_from_the_ledger_already_there(engine: Engine, session: Session) -> None:
    """Upgrading a database that has ledger entries but no budget_balances (revision 0003) sums them once."""
    seed_org(session)
    period = open_period(session, WEEKLY, T0).id
    session.commit()
    downgrade(engine, "0003")
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(LedgerEntryRow),
                [
                    {
                        "period_id": period,
                        "budget": LEAVES[i % 3],
                        "kind": (EntryKind.CHARGE if i % 2 else EntryKind.ADJUSTMENT).value,
                        "amount_micro": -(i + 1) * 1000,
                        "at": T0 + i,
                        "job_id": None,
                        "run_id": None,
                        "idempotency_key": f"old-{i}",
                        "memo": "",
                    }
                    for i in range(30)
                ],
            )
    finally:
        upgrade(engine)
    session.expire_all()
    kept, summed = _both(session, [period])
    assert kept == summed
    assert kept[period]["detect"] == (
        3_000 * H100 - sum((i + 1) * 1000 for i in range(0, 30, 3)),
        sum((i + 1) * 1000 for i in range(0, 30, 3) if i % 2),
    )
