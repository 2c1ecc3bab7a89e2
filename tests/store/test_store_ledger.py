"""Posting, balances, periods, refunds and usage against a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from allotment.core.model import RunClass
from allotment.core.units import cost
from allotment.ledger import INFRASTRUCTURE, Entry, EntryKind, Rollover, adjust_key, charge_key
from allotment.ledger.periods import WEEK, period_at
from allotment.store.accounts import (
    balances,
    open_period,
    periods,
    post,
    posting_period,
    rolled_up,
)
from allotment.store.errors import ClosedPeriodError, NoOpenPeriodError
from allotment.store.metering import (
    add_usage,
    charge_run,
    charged_total,
    refund_run,
    reprice_run,
    usages,
)
from allotment.store.tables import LedgerEntryRow

from .support import H100, T0, WEEKLY, seed_org, start


def adjustment(budget: str, amount: int, at: int, period_id: str, request: str = "r1") -> Entry:
    return Entry(budget, EntryKind.ADJUSTMENT, amount, at, adjust_key(budget, request), period_id)


def test_opening_a_period_posts_leaf_allocations_once(session: Session) -> None:
    seed_org(session)
    first = open_period(session, WEEKLY, T0 + 10)
    again = open_period(session, WEEKLY, T0 + 20)
    assert first == again
    own = balances(session, first.id)
    assert own == {"detect": 3_000 * H100, "segment": 2_000 * H100, "chat": 4_000 * H100}
    up = rolled_up(session, first.id)
    assert up["vision"] == 5_000 * H100
    assert up["language"] == 4_000 * H100
    assert up["org"] == 9_000 * H100
    assert up[INFRASTRUCTURE] == 0


def test_the_same_key_posts_once(session: Session) -> None:
    seed_org(session)
    period = open_period(session, WEEKLY, T0)
    entry = adjustment("chat", -5 * H100, T0 + 5, period.id)
    assert post(session, entry) is True
    assert post(session, entry) is False
    session.commit()
    assert post(session, entry) is False
    assert balances(session, period.id)["chat"] == 3_995 * H100
    count = session.scalar(select(func.count()).where(LedgerEntryRow.idempotency_key == entry.key))
    assert count == 1


def test_concurrent_posts_of_one_key_record_it_once(session: Session, sessions: sessionmaker[Session]) -> None:
    seed_org(session)
    period = open_period(session, WEEKLY, T0)
    session.commit()
    threads_per_key, keys = 4, 6
    results: dict[str, list[bool]] = {f"r{k}": [] for k in range(keys)}
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_per_key)
    lock = threading.Lock()

    def worker() -> None:
        try:
            for request in sorted(results):
                barrier.wait()
                with sessions() as s:
                    new = post(s, adjustment("detect", -H100, T0 + 1, period.id, request))
                    s.commit()
                with lock:
                    results[request].append(new)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(threads_per_key)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(sorted(r) == [False] * (threads_per_key - 1) + [True] for r in results.values())
    session.expire_all()
    assert balances(session, period.id)["detect"] == (3_000 - keys) * H100


def test_rollover_without_carry_renews_allocations_only(session: Session) -> None:
    seed_org(session)
    p1 = open_period(session, WEEKLY, T0)
    post(session, adjustment("detect", -1_000 * H100, T0 + 5, p1.id))
    post(session, adjustment("chat", -4_500 * H100, T0 + 5, p1.id))
    p2 = open_period(session, WEEKLY, T0 + WEEK + 60)
    assert [(p.id, p.closed) for p in periods(session)] == [(p1.id, True), (p2.id, False)]
    assert balances(session, p2.id) == {"detect": 3_000 * H100, "segment": 2_000 * H100, "chat": 4_000 * H100}
    with pytest.raises(ClosedPeriodError):
        post(session, adjustment("detect", -H100, T0 + 6, p1.id, "late"))
    assert post(session, adjustment("detect", -1_000 * H100, T0 + 5, p1.id)) is False  # a retry is still fine
    assert posting_period(session, T0 + 6) == p2.id  # late entries land in the open period


def test_rollover_with_carry_brings_unspent_credit_and_optionally_debt(session: Session) -> None:
    seed_org(session)
    p1 = open_period(session, WEEKLY, T0)
    post(session, adjustment("detect", -1_000 * H100, T0 + 5, p1.id))
    post(session, adjustment("chat", -4_500 * H100, T0 + 5, p1.id))
    p2 = open_period(session, WEEKLY, T0 + WEEK, Rollover(carry_credit=True))
    assert balances(session, p2.id) == {"detect": 5_000 * H100, "segment": 4_000 * H100, "chat": 4_000 * H100}
    open_period(session, WEEKLY, T0 + WEEK, Rollover(carry_credit=True))  # idempotent
    assert rolled_up(session, p2.id)["org"] == 13_000 * H100
    post(session, adjustment("segment", -4_100 * H100, T0 + WEEK + 5, p2.id))
    p3 = open_period(session, WEEKLY, T0 + 2 * WEEK, Rollover(carry_credit=True, carry_debt=True))
    assert balances(session, p3.id) == {"detect": 8_000 * H100, "segment": 1_900 * H100, "chat": 8_000 * H100}


def test_entries_need_an_open_period(session: Session) -> None:
    seed_org(session)
    with pytest.raises(NoOpenPeriodError):
        posting_period(session, T0)
    with pytest.raises(NoOpenPeriodError):
        post(session, adjustment("detect", 1, T0, "1999-01-01"))


def test_a_run_is_charged_in_pieces_that_sum_to_its_cost(session: Session) -> None:
    seed_org(session)
    period = open_period(session, WEEKLY, T0)
    run = start(session, "j1", T0 + 100, gpus=3)
    for until in (T0 + 107, T0 + 107, T0 + 733, T0 + 500, T0 + 4000):
        charge_run(session, run, until)
    assert charged_total(session, run) == cost(3, H100, 1000, 3900)
    assert balances(session, period.id)["detect"] == 3_000 * H100 - cost(3, H100, 1000, 3900)
    keys = set(session.scalars(select(LedgerEntryRow.idempotency_key).where(LedgerEntryRow.run_id == run)))
    assert keys == {charge_key(run, t) for t in (T0 + 107, T0 + 733, T0 + 4000)}


def test_a_class_change_reprices_from_then_on(session: Session) -> None:
    seed_org(session)
    open_period(session, WEEKLY, T0)
    run = start(session, "j1", T0, gpus=8)
    charge_run(session, run, T0 + 1000)
    reprice_run(session, run, T0 + 3600, RunClass.OPPORTUNISTIC, 400)
    charge_run(session, run, T0 + 5000)
    expected = cost(8, H100, 1000, 3600) + cost(8, H100, 400, 1400)
    assert charged_total(session, run) == expected


def test_refund_moves_a_lost_runs_charges_to_the_infrastructure_account(session: Session) -> None:
    seed_org(session)
    period = open_period(session, WEEKLY, T0)
    run = start(session, "j1", T0, gpus=8)
    other = start(session, "j2", T0, gpus=2)
    charge_run(session, run, T0 + 1800)
    charge_run(session, other, T0 + 1800)
    charge_run(session, run, T0 + 2700)
    lost = cost(8, H100, 1000, 2700)
    assert refund_run(session, run, T0 + 2700, "node-down") == lost
    assert refund_run(session, run, T0 + 2800, "node-down") == 0  # once per run
    own = balances(session, period.id)
    assert own["detect"] == 3_000 * H100 - cost(2, H100, 1000, 1800)
    assert own[INFRASTRUCTURE] == -lost
    # Every GPU-second charged exactly once, to one account: the ledger's charges sum to what ran.
    all_charges = session.scalar(
        select(func.sum(LedgerEntryRow.amount_micro)).where(LedgerEntryRow.kind.in_(["charge", "refund"]))
    )
    assert -int(all_charges or 0) == lost + cost(2, H100, 1000, 1800)


def test_usage_decays_and_accumulates(session: Session) -> None:
    seed_org(session)
    half_life = 3600
    assert add_usage(session, "detect", T0, 8 * H100, half_life) == 0.0
    stepwise = 0.0
    for step in range(1, 7):
        stepwise = add_usage(session, "detect", T0 + step * 600, 8 * H100, half_life)
    add_usage(session, "chat", T0, 0, half_life)
    once = add_usage(session, "chat", T0 + 3600, 8 * H100, half_life)
    assert stepwise == pytest.approx(once, rel=1e-12)
    assert 4.0 < once < 8.0  # less than 8 GPU-hours held, because early hours decayed
    later = usages(session, T0 + 2 * 3600, half_life)
    assert later["detect"] == pytest.approx(stepwise / 2, rel=1e-12)


def test_period_ids_follow_the_calendar() -> None:
    assert period_at(WEEKLY, T0).id == "2026-01-01"
    assert period_at(WEEKLY, T0 + WEEK).id == "2026-01-08"
