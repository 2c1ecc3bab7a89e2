"""Charge lines (service/charges.py): consecutive charges of one run at one rate and price coalesce into one line;
a price change, a gap, another run, budget or period starts a new one; other entries stay lines of their own."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from allotment.ledger.charges import Piece, charge_memo
from allotment.service.charges import charge_lines
from allotment.store.tables import LedgerEntryRow

T = 1_796_000_000
RATE = 16_000_000  # 16 GPUs of 1 credit an hour


@dataclass
class Ledger:
    """A small fluent builder of ledger rows, numbered in posting order."""

    rows: list[LedgerEntryRow] = field(default_factory=list)

    def _add(self, kind: str, amount: int, at: int, run: str | None, memo: str, budget: str, period: str) -> Ledger:
        row = LedgerEntryRow(
            id=len(self.rows) + 1, period_id=period, budget=budget, kind=kind, amount_micro=amount, at=at,
            job_id=run.split(".")[0] if run else None, run_id=run, idempotency_key=f"k{len(self.rows)}", memo=memo,
        )  # fmt: skip
        self.rows.append(row)
        return self

    def charge(
        self, run: str, start: int, end: int, price: int = 1000, budget: str = "pretrain", period: str = "p1"
    ) -> Ledger:
        amount = -(RATE * price // 1000) * (end - start) // 3600
        return self._add("charge", amount, end, run, charge_memo(Piece(RATE, price, start, end)), budget, period)

    def other(self, kind: str, amount: int, memo: str, run: str | None = None) -> Ledger:
        return self._add(kind, amount, T, run, memo, "pretrain", "p1")


@dataclass(frozen=True)
class Case:
    ledger: Ledger
    lines: list[tuple[str, str | None, int | None, int, int | None, int]]
    """(kind, run, start, end, price, entries) per line, oldest first."""


CASES = {
    "consecutive pieces of one run: one line": Case(
        Ledger().charge("j.0", T, T + 5).charge("j.0", T + 5, T + 10).charge("j.0", T + 10, T + 15),
        [("charge", "j.0", T, T + 15, 1000, 3)],
    ),
    "a price change (a lapsed slice) starts a line": Case(
        Ledger().charge("j.0", T, T + 5).charge("j.0", T + 5, T + 10, price=400).charge("j.0", T + 10, T + 15, 400),
        [("charge", "j.0", T, T + 5, 1000, 1), ("charge", "j.0", T + 5, T + 15, 400, 2)],
    ),
    "a gap starts a line": Case(
        Ledger().charge("j.0", T, T + 5).charge("j.0", T + 9, T + 15),
        [("charge", "j.0", T, T + 5, 1000, 1), ("charge", "j.0", T + 9, T + 15, 1000, 1)],
    ),
    "two runs interleaved: a line each": Case(
        Ledger()
        .charge("a.0", T, T + 5)
        .charge("b.0", T, T + 5)
        .charge("a.0", T + 5, T + 10)
        .charge("b.0", T + 5, T + 10),
        [("charge", "a.0", T, T + 10, 1000, 2), ("charge", "b.0", T, T + 10, 1000, 2)],
    ),
    "a new period starts a line": Case(
        Ledger().charge("j.0", T, T + 5).charge("j.0", T + 5, T + 10, period="p2"),
        [("charge", "j.0", T, T + 5, 1000, 1), ("charge", "j.0", T + 5, T + 10, 1000, 1)],
    ),
    "allocations, refunds and the infrastructure's mirrored charge stay alone": Case(
        Ledger()
        .other("allocation", 8_000_000_000, "")
        .charge("j.0", T, T + 5)
        .other("refund", 22_222, "node lost", run="j.0")
        .other("charge", -22_222, "node lost", run="j.0"),
        [
            ("allocation", None, None, T, None, 1),
            ("charge", "j.0", T, T + 5, 1000, 1),
            ("refund", "j.0", None, T, None, 1),
            ("charge", "j.0", None, T, None, 1),
        ],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_charge_lines(case: Case) -> None:
    lines = charge_lines(case.ledger.rows, {"j.0": 16, "a.0": 16, "b.0": 16})
    assert [(c.kind, c.run_id, c.start, c.end, c.price, c.entries) for c in lines] == case.lines
    assert sum(c.amount_micro for c in lines) == sum(r.amount_micro for r in case.ledger.rows)
    for c in lines:
        assert (c.memo is None) == (c.entries > 1)  # the raw memo only for a line of one entry
        if c.price is not None:
            assert (c.gpus, c.gpu_rate_micro, c.seconds) == (16, 1_000_000, c.end - (c.start or 0))
