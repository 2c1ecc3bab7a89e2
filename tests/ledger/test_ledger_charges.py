"""Entries, keys, charge accrual (exact to the microunit), repricing and refunds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allotment.core.model import PolicyConfig, RunClass
from allotment.core.units import cost
from allotment.ledger import (
    INFRASTRUCTURE,
    Entry,
    EntryKind,
    Meter,
    accrue,
    alloc_key,
    charge_key,
    price_for,
    refund,
    reprice,
    run_id,
    run_rate,
)
from allotment.ledger.charges import Piece, charge_memo, read_charge_memo

from .conftest import B200, H100, T0


def meter(rate: int = 8 * H100, price: int = 1000, start: int = T0) -> Meter:
    return Meter("j1.0", "j1", "detect", rate, price, start, start)


def test_signs_follow_the_kind() -> None:
    Entry("a", EntryKind.CHARGE, -5, T0, "k", "p")
    Entry("a", EntryKind.ADJUSTMENT, -5, T0, "k", "p")
    Entry("a", EntryKind.CARRYOVER, 5, T0, "k", "p")
    with pytest.raises(ValueError, match="takes from"):
        Entry("a", EntryKind.CHARGE, 5, T0, "k", "p")
    with pytest.raises(ValueError, match="adds to"):
        Entry("a", EntryKind.REFUND, -5, T0, "k", "p")
    with pytest.raises(ValueError, match="adds to"):
        Entry("a", EntryKind.ALLOCATION, -5, T0, "k", "p")
    with pytest.raises(ValueError, match="key"):
        Entry("a", EntryKind.ALLOCATION, 5, T0, "", "p")


def test_keys_name_what_happens_once() -> None:
    assert run_id("job-7", 2) == "job-7.2"
    assert charge_key("job-7.2", T0) == f"charge:job-7.2:{T0}"
    assert alloc_key("detect", "2026-01-01") == "alloc:detect:2026-01-01"


def test_price_by_run_class(policy: PolicyConfig) -> None:
    assert price_for(RunClass.GUARANTEED, policy) == 1000
    assert price_for(RunClass.SESSION, policy) == policy.session_price
    assert price_for(RunClass.OPPORTUNISTIC, policy) == 400


def test_rate_sums_gpus_times_type_rate() -> None:
    assert run_rate([("h100", 8), ("b200", 4)], {"h100": H100, "b200": B200}) == 8 * H100 + 4 * B200


def test_accrual_charges_gpus_times_rate_times_price_times_time() -> None:
    entry, after = accrue(meter(price=400), T0 + 1800, "p")
    assert entry is not None
    assert entry.amount == -(8 * H100 * 400 // 1000 // 2)
    assert (entry.kind, entry.key, entry.budget, entry.run_id) == (
        EntryKind.CHARGE,
        f"charge:j1.0:{T0 + 1800}",
        "detect",
        "j1.0",
    )
    assert after.charged_until == T0 + 1800


def test_stale_and_repeated_accruals_charge_nothing() -> None:
    _, after = accrue(meter(), T0 + 100, "p")
    assert accrue(after, T0 + 100, "p") == (None, after)
    assert accrue(after, T0 + 50, "p") == (None, after)


def test_pieces_too_small_to_cost_a_microunit_are_carried_not_lost() -> None:
    m = meter(rate=1, price=400)  # 0.4 micro per hour
    total = 0
    for hour in range(1, 11):
        entry, m = accrue(m, T0 + hour * 3600, "p")
        total += 0 if entry is None else -entry.amount
    assert total == cost(1, 1, 400, 36_000) == 4


@given(
    rate=st.integers(min_value=1, max_value=10**9),
    price=st.integers(min_value=1, max_value=1000),
    cuts=st.lists(st.integers(min_value=0, max_value=10**7), max_size=30),
    length=st.integers(min_value=0, max_value=10**7),
)
def test_any_split_sums_to_the_whole_run(rate: int, price: int, cuts: list[int], length: int) -> None:
    m = meter(rate, price)
    total = 0
    for until in [*(T0 + min(c, length) for c in cuts), T0 + length]:  # unsorted: late pieces first too
        entry, m = accrue(m, until, "p")
        total += 0 if entry is None else -entry.amount
    assert total == cost(1, rate, price, length)


def test_repricing_starts_a_new_segment() -> None:
    entry1, m = accrue(meter(), T0 + 3600, "p")
    m = reprice(m, 400, T0 + 3600)
    entry2, m = accrue(m, T0 + 5400, "p")
    assert entry1 is not None and entry2 is not None
    assert -entry1.amount - entry2.amount == cost(8, H100, 1000, 3600) + cost(8, H100, 400, 1800)
    with pytest.raises(ValueError, match="accrue"):
        reprice(m, 1000, T0 + 9000)


def test_refund_gives_back_everything_and_charges_infrastructure() -> None:
    back, infra = refund("detect", "j1.0", 123, job_id="j1", at=T0, period_id="p", reason="node-down")
    assert (back.budget, back.kind, back.amount, back.key) == ("detect", EntryKind.REFUND, 123, "refund:j1.0")
    assert (infra.budget, infra.kind, infra.amount, infra.key) == (
        INFRASTRUCTURE,
        EntryKind.CHARGE,
        -123,
        "infra:j1.0",
    )
    assert refund("detect", "j1.0", 0, job_id="j1", at=T0, period_id="p", reason="forced-drain") == ()
    with pytest.raises(ValueError):
        refund("detect", "j1.0", -1, job_id="j1", at=T0, period_id="p", reason="x")


def test_a_charge_memo_reads_back_as_the_piece_it_names() -> None:
    piece = Piece(16_000_000, 1000, 1_796_129_622, 1_796_129_627)
    assert charge_memo(piece) == "16000000 µ/h at 1000‰ for [1796129622, 1796129627)"
    assert read_charge_memo(charge_memo(piece)) == piece
    assert read_charge_memo("node lost") is None
