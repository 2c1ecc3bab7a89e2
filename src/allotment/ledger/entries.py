"""Ledger entries: what one credit movement is, its sign, and the idempotency key that makes it happen
once.

Owns: the EntryKind vocabulary, the Entry record, the sign convention (an entry's amount is its effect on
the budget's balance) and the builders of idempotency keys.

Must not: persist anything or decide when an entry is due (see charges and periods).

Sign convention: `amount` is signed credit-microunits added to the budget's balance in the entry's period.
allocation ≥ 0, charge ≤ 0, refund ≥ 0; carryover and adjustment may take either sign. A balance is the
plain sum of a budget's amounts in a period; spending is the negated sum of its charges and refunds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from allotment.core.model import Micro, Seconds

INFRASTRUCTURE = "infrastructure"
"""The account that pays for GPU time lost through the fleet's fault (node failure, an administrator's forced
action). It is a root budget outside the organisation tree with no allocation; its balance only goes down."""


class EntryKind(StrEnum):
    ALLOCATION = "allocation"  # a period's allocation to a leaf budget (+)
    CHARGE = "charge"  # GPU time held by a run (−); the infrastructure account's mirror of a refund (−)
    REFUND = "refund"  # a run's charges given back to its owner (+)
    CARRYOVER = "carryover"  # the previous period's closing balance brought forward (±), only if configured
    ADJUSTMENT = "adjustment"  # an administrator's explicit correction (±)


_SIGNS: dict[EntryKind, int] = {
    EntryKind.ALLOCATION: 1,
    EntryKind.CHARGE: -1,
    EntryKind.REFUND: 1,
    EntryKind.CARRYOVER: 0,
    EntryKind.ADJUSTMENT: 0,
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One credit movement. Posting the same `key` twice records it once."""

    budget: str
    kind: EntryKind
    amount: Micro
    at: Seconds
    key: str
    period_id: str
    job_id: str | None = None
    run_id: str | None = None
    memo: str = ""

    def __post_init__(self) -> None:
        sign = _SIGNS[self.kind]
        if sign > 0 and self.amount < 0:
            raise ValueError(f"a {self.kind} entry adds to the balance; got amount {self.amount}")
        if sign < 0 and self.amount > 0:
            raise ValueError(f"a {self.kind} entry takes from the balance; got amount {self.amount}")
        if not self.key:
            raise ValueError("an entry needs an idempotency key")


def run_id(job_id: str, attempt: int) -> str:
    """The id of a job's run: deterministic, so a run re-created after a crash keeps its keys."""
    return f"{job_id}.{attempt}"


def alloc_key(budget: str, period_id: str) -> str:
    return f"alloc:{budget}:{period_id}"


def carry_key(budget: str, period_id: str) -> str:
    """The carry-over into `period_id` (from the period before it)."""
    return f"carry:{budget}:{period_id}"


def charge_key(run: str, until: Seconds) -> str:
    """The charge of a run up to `until`. Charges of one run are consecutive pieces, so the end names the
    piece."""
    return f"charge:{run}:{until}"


def refund_key(run: str) -> str:
    return f"refund:{run}"


def infra_key(run: str) -> str:
    """The infrastructure account's charge mirroring the refund of `run`."""
    return f"infra:{run}"


def adjust_key(budget: str, request: str) -> str:
    """An administrator's adjustment; `request` is the caller's unique request id, so a retried request
    posts once."""
    return f"adjust:{budget}:{request}"
