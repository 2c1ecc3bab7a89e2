"""Charge accrual and refund rules for runs.

Owns: the full-price rate of a placement, the price of a run class, the charge of a run up to an instant
(exact: pieces of one price segment always sum to the cost of the whole segment), the memo a charge carries and
how it is read back (`charge_memo`, `read_charge_memo`), and the refund of a run lost through the fleet's fault.

Must not: read a clock or a database. The store keeps each run's meter (rate, price, price_since,
charged_until) and advances it in the same transaction that posts the entry this module computes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from allotment.core.model import FULL_PRICE, Micro, PolicyConfig, RunClass, Seconds
from allotment.core.units import charge_between
from allotment.ledger.entries import INFRASTRUCTURE, Entry, EntryKind, charge_key, infra_key, refund_key


def run_rate(placement: Iterable[tuple[str, int]], rates: Mapping[str, Micro]) -> Micro:
    """Credit-microunits per hour at full price for holding `placement`: Σ GPUs × rate of their type.

    `placement` is (gpu_type, GPU count) pairs, one per node. Because cost() is linear in GPUs × rate,
    charging a run as one GPU at this combined rate rounds once per piece, exactly like a single-type run."""
    return sum(gpus * rates[gpu_type] for gpu_type, gpus in placement)


def price_for(run_class: RunClass, policy: PolicyConfig) -> int:
    """Per-mille price of a run class: guaranteed at full price, sessions and opportunistic work as
    configured."""
    if run_class is RunClass.GUARANTEED:
        return FULL_PRICE
    if run_class is RunClass.SESSION:
        return policy.session_price
    return policy.opportunistic_price


@dataclass(frozen=True, slots=True)
class Meter:
    """The charging state of one run.

    The run is charged at `price` since `price_since` (its start, or the instant its class last changed)
    and has been charged up to `charged_until`. Charges are differences of the cumulative cost since
    `price_since`, so the rounding of one piece is absorbed by the next and never accumulates."""

    run_id: str
    job_id: str
    budget: str
    rate: Micro
    """Credit-microunits per hour at full price (see run_rate)."""
    price: int
    price_since: Seconds
    charged_until: Seconds


def accrue(meter: Meter, until: Seconds, period_id: str) -> tuple[Entry | None, Meter]:
    """The charge for [meter.charged_until, until) and the advanced meter.

    Returns no entry when `until` is not past what was charged (a retry or a stale request) or when the piece
    rounds to zero microunits (the next piece then carries it, so nothing is lost)."""
    if until <= meter.charged_until:
        return None, meter
    amount = charge_between(1, meter.rate, meter.price, meter.price_since, meter.charged_until, until)
    advanced = replace(meter, charged_until=until)
    if amount == 0:
        return None, advanced
    entry = Entry(
        budget=meter.budget,
        kind=EntryKind.CHARGE,
        amount=-amount,
        at=until,
        key=charge_key(meter.run_id, until),
        period_id=period_id,
        job_id=meter.job_id,
        run_id=meter.run_id,
        memo=charge_memo(Piece(meter.rate, meter.price, meter.charged_until, until)),
    )
    return entry, advanced


@dataclass(frozen=True, slots=True)
class Piece:
    """What one charge entry paid for: `rate` credit-microunits per hour at full price, at `price` per mille, over
    [start, end)."""

    rate: Micro
    price: int
    start: Seconds
    end: Seconds


_MEMO = re.compile(r"(\d+) µ/h at (\d+)‰ for \[(-?\d+), (-?\d+)\)")


def charge_memo(piece: Piece) -> str:
    """The memo of a charge entry (the ledger's raw record of what it paid for)."""
    return f"{piece.rate} µ/h at {piece.price}‰ for [{piece.start}, {piece.end})"


def read_charge_memo(memo: str) -> Piece | None:
    """The piece a charge memo names; None for any other memo (refunds, the infrastructure's mirrored charges)."""
    found = _MEMO.fullmatch(memo)
    if found is None:
        return None
    rate, price, start, end = (int(g) for g in found.groups())
    return Piece(rate, price, start, end)


def reprice(meter: Meter, price: int, at: Seconds) -> Meter:
    """The meter after the run's price changes at `at` (e.g. a slice lapses into opportunistic running).
    The caller must first accrue up to `at`; the new segment's cumulative cost starts from zero there."""
    if meter.charged_until != at:
        raise ValueError(f"accrue up to {at} before repricing (charged until {meter.charged_until})")
    return replace(meter, price=price, price_since=at)


def refund(
    owner: str,
    run: str,
    charged: Micro,
    *,
    job_id: str | None,
    at: Seconds,
    period_id: str,
    reason: str,
    infrastructure: str = INFRASTRUCTURE,
) -> tuple[Entry, ...]:
    """The refund of a run ended by the fleet's fault (node failure, an administrator's forced action).

    `charged` is everything the run was charged (a positive amount). The owner gets it back and the
    infrastructure account is charged the same, so the GPU time stays charged exactly once, to exactly one
    account. Both entries carry keys derived from the run, so a retried refund posts once."""
    if charged < 0:
        raise ValueError("charged is the positive total a run was charged")
    if charged == 0:
        return ()
    return (
        Entry(owner, EntryKind.REFUND, charged, at, refund_key(run), period_id, job_id, run, reason),
        Entry(infrastructure, EntryKind.CHARGE, -charged, at, infra_key(run), period_id, job_id, run, reason),
    )
