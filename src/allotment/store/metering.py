"""Run meters, refunds and fair-share usage, read and persisted.

Owns: reading a run's meter (OpenRun, the columns it is read from), creating a run's row with its meter, charging
or repricing one run outside a cycle (loaded under a row lock, then the same change-set rules the engine uses —
allotment.changes — persisted by store/persist.py), refunding a run lost through the fleet's fault, and the budget_usage
table.

Must not: decide when to charge, refund or reprice (the engine's steps do), or compute amounts itself
(allotment.ledger does, through allotment.changes).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from allotment.changes.decisions import repriced
from allotment.changes.events import refunded
from allotment.changes.records import ChangeSet, OpenRun
from allotment.changes.steps import charges, decay_usage
from allotment.core.model import Micro, RunClass, Seconds
from allotment.ledger import EntryKind
from allotment.ledger import run_id as make_run_id
from allotment.ledger.usage import decayed
from allotment.store.accounts import post_all, posting_period
from allotment.store.db import in_batches
from allotment.store.persist import persist
from allotment.store.tables import BudgetUsageRow, JobRow, LedgerEntryRow, RunRow

METER_COLUMNS = (
    RunRow.id,
    RunRow.job_id,
    RunRow.attempt,
    JobRow.budget,
    RunRow.started_at,
    RunRow.run_class,
    RunRow.rate_micro,
    RunRow.price,
    RunRow.price_since,
    RunRow.charged_until,
    RunRow.signalled_at,
    RunRow.preempt_reason,
    RunRow.requeue,
    RunRow.confirmed_at,
    RunRow.checkpoint_at,
)
"""The columns an OpenRun is read from (with runs joined to jobs)."""
_RUN_CLASSES = {c.value: c for c in RunClass}


def open_run_of(row: Any) -> OpenRun:
    """The OpenRun of a row of METER_COLUMNS."""
    return OpenRun(
        row[0], row[1], row[2], row[3], row[4], _RUN_CLASSES[row[5]], row[6], row[7], row[8], row[9],
        row[10] is not None, row[11], row[12], row[13] is not None, row[14],
    )  # fmt: skip


_RUN_METER = (
    select(*METER_COLUMNS, RunRow.ended_at)
    .join(JobRow, JobRow.id == RunRow.job_id)
    .where(RunRow.id == bindparam("run_id"))
    .with_for_update(of=RunRow)
)


def _locked_meter(session: Session, run_id: str) -> tuple[OpenRun, Seconds | None]:
    """Run `run_id`'s meter and end, under a row lock."""
    session.flush()  # a run added through the ORM (new_run) in this transaction first
    row = session.connection().execute(_RUN_METER, {"run_id": run_id}).first()
    if row is None:
        raise LookupError(f"run {run_id} does not exist")
    ended_at = row[len(METER_COLUMNS)]
    return open_run_of(row), None if ended_at is None else int(ended_at)


def charge_run(session: Session, run_id: str, until: Seconds) -> Micro:
    """Charge run `run_id` for [charged_until, until) (capped at its end) and advance charged_until, in this
    transaction. Returns the amount newly charged (positive). Repeating a call, or calling it with an earlier
    instant, charges nothing; the pieces of a run always sum to its whole cost to the microunit."""
    run, ended_at = _locked_meter(session, run_id)
    if ended_at is not None:
        until = min(until, ended_at)
    changes = charges([run], ChangeSet(), until, posting_period(session, until))
    persist(session, changes, until)
    return changes.charged


def reprice_run(session: Session, run_id: str, at: Seconds, run_class: RunClass, price: int) -> Micro:
    """Change a running run's class and price from `at` on (or from what is already charged, if later): the
    run is first charged up to there at its old price. Returns the amount charged by that catch-up."""
    run, ended_at = _locked_meter(session, run_id)
    if ended_at is not None:
        raise ValueError(f"run {run_id} has ended; it cannot be repriced")
    changes = ChangeSet()
    repriced(changes, run, at, run_class, price, posting_period(session, at))
    persist(session, changes, at)
    return changes.charged


def charged_totals(session: Session, run_ids: Iterable[str]) -> dict[str, Micro]:
    """Everything each run's owner was charged for it (positive), for the runs that were charged at all."""
    session.flush()  # read with Core on the session's connection: the ORM's pending changes first
    out: dict[str, Micro] = {}
    conn = session.connection()
    for batch in in_batches(sorted(set(run_ids))):
        out.update((str(run_id), -int(total or 0)) for run_id, total in conn.execute(_CHARGED, {"ids": batch}))
    return out


def charged_total(session: Session, run_id: str) -> Micro:
    """Everything the run's owner was charged for it (positive)."""
    return charged_totals(session, [run_id]).get(run_id, 0)


_CHARGED = (
    select(LedgerEntryRow.run_id, func.sum(LedgerEntryRow.amount_micro))
    .join(RunRow, RunRow.id == LedgerEntryRow.run_id)
    .join(JobRow, JobRow.id == RunRow.job_id)
    .where(
        LedgerEntryRow.run_id.in_(bindparam("ids", expanding=True)),
        LedgerEntryRow.kind == EntryKind.CHARGE.value,
        LedgerEntryRow.budget == JobRow.budget,
    )
    .group_by(LedgerEntryRow.run_id)
)


def refund_run(session: Session, run_id: str, at: Seconds, reason: str) -> Micro:
    """Refund everything run `run_id` was charged to its owner and charge the same to the infrastructure
    account (a run ended by node failure or an administrator's forced action). Charge the run's last piece
    first; a refund happens once per run. Returns the amount newly refunded."""
    run, _ = _locked_meter(session, run_id)
    charged = charged_total(session, run_id)
    changes = ChangeSet()
    refunded(changes, run, charged, at, posting_period(session, at), reason)
    new = post_all(session, changes.entries)
    session.flush()
    return charged if new else 0


def add_usage(session: Session, budget: str, now: Seconds, rate: Micro, half_life: Seconds) -> float:
    """Advance `budget`'s decayed usage to `now`, adding a holding of `rate` credit-microunits per hour at
    full price since its last update (the first update only starts the clock), by the engine's usage-decay rule
    (changes.steps.decay_usage). Returns the new usage."""
    session.flush()
    row = session.connection().execute(_USAGE_OF, {"budget": budget}).first()
    recorded = {} if row is None else {budget: (float(row[0]), int(row[1]))}
    decayed_now = decay_usage(recorded, {budget: rate}, None, now, half_life)
    persist(session, ChangeSet(usage=decayed_now.usage), now)
    return decayed_now.usage[0].usage if decayed_now.usage else recorded[budget][0]


_USAGE_OF = (
    select(BudgetUsageRow.usage, BudgetUsageRow.as_of)
    .where(BudgetUsageRow.budget == bindparam("budget"))
    .with_for_update()
)


def usages(session: Session, now: Seconds, half_life: Seconds) -> dict[str, float]:
    """Every budget's recorded usage decayed to `now`."""
    session.flush()  # read with Core on the session's connection: the ORM's pending changes first
    return {
        budget: decayed(usage, as_of, now, half_life) for budget, usage, as_of in session.connection().execute(_USAGES)
    }


_USAGES = select(BudgetUsageRow.budget, BudgetUsageRow.usage, BudgetUsageRow.as_of)


def new_run(
    session: Session,
    *,
    job_id: str,
    attempt: int,
    started_at: Seconds,
    placement: list[dict[str, object]],
    run_class: RunClass,
    slice_end: Seconds | None,
    rate: Micro,
    price: int,
) -> RunRow:
    """Add a run whose meter starts at `started_at`: charged up to its start, priced `price` per mille of
    `rate` (credit-microunits per hour at full price, see allotment.ledger.run_rate). It is written at the session's
    next flush (a cycle's new runs go together, as one batch of inserts)."""
    row = RunRow(
        id=make_run_id(job_id, attempt),
        job_id=job_id,
        attempt=attempt,
        started_at=started_at,
        placement=placement,
        run_class=run_class.value,
        slice_end=slice_end,
        rate_micro=rate,
        price=price,
        price_since=started_at,
        charged_until=started_at,
    )
    session.add(row)
    return row
