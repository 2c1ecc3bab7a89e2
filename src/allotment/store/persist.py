"""Persisting a ChangeSet (allotment.changes) in the caller's transaction, on SQLite and PostgreSQL.

Owns: how each part of a change set becomes rows — runs inserted and updated, job states and their history records,
ledger entries posted under their idempotency keys (store/accounts.post), slices, intents (encoded by
allotment.changes.intents; their ids follow the change set's order, which is delivery order), pending reasons
upserted and deleted, reservations replaced, usage and engine keys — in a few executemany statements, with Core
(no ORM objects to track).

Must not: decide what changes (allotment.changes does), price anything, or commit (the caller's transaction does).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, insert, update
from sqlalchemy.orm import Session

from allotment.changes.intents import encode
from allotment.changes.records import ChangeSet
from allotment.core.model import Seconds
from allotment.store.accounts import dialect_insert, post_all
from allotment.store.records import set_state
from allotment.store.tables import (
    BudgetUsageRow,
    IntentRow,
    JobEventRow,
    JobRow,
    PendingReasonRow,
    ReservationRow,
    RunRow,
    SliceRow,
)

# statements built once (decision 39)
_INSERT_RUNS = insert(RunRow)
_SIGNAL = (
    update(RunRow)
    .where(RunRow.id == bindparam("b_id"))
    .values(
        signalled_at=bindparam("b_at"),
        kill_at=bindparam("b_kill"),
        preempt_reason=bindparam("b_reason"),
        preemptor=bindparam("b_preemptor"),
        requeue=bindparam("b_requeue"),
    )
)
_END = (
    update(RunRow)
    .where(RunRow.id == bindparam("b_id"))
    .values(ended_at=bindparam("b_at"), exit_code=bindparam("b_code"), end_reason=bindparam("b_reason"))
)
_CONFIRM = update(RunRow).where(RunRow.id == bindparam("b_id")).values(confirmed_at=bindparam("b_v"))
_IDLE = update(RunRow).where(RunRow.id == bindparam("b_id")).values(idle_since=bindparam("b_v"))
_CHECKPOINT = (
    update(RunRow)
    .where(RunRow.id == bindparam("b_id"))
    .values(checkpoint_at=bindparam("b_v"), checkpoint_every=bindparam("b_every"))
)
_SLICE_END = update(RunRow).where(RunRow.id == bindparam("b_id")).values(slice_end=bindparam("b_v"))
_METER = (
    update(RunRow)
    .where(RunRow.id == bindparam("b_id"))
    .values(price=bindparam("b_price"), price_since=bindparam("b_since"), charged_until=bindparam("b_until"))
)
_RECLASS = update(RunRow).where(RunRow.id == bindparam("b_id")).values(run_class=bindparam("b_v"))
_JOB_STATE = (
    update(JobRow)
    .where(JobRow.id == bindparam("b_id"))
    .values(state=bindparam("b_state"), state_reason=bindparam("b_why"), updated_at=bindparam("b_at"))
)
_JOB_STARTED = (
    update(JobRow)
    .where(JobRow.id == bindparam("b_id"))
    .values(
        state=bindparam("b_state"),
        state_reason=bindparam("b_why"),
        updated_at=bindparam("b_at"),
        attempt=bindparam("b_attempt"),
    )
)
_INSERT_EVENTS = insert(JobEventRow)
_INSERT_SLICES = insert(SliceRow)
_INSERT_INTENTS = insert(IntentRow)
_DELETE_REASONS = delete(PendingReasonRow).where(PendingReasonRow.job_id.in_(bindparam("ids", expanding=True)))
_DELETE_RESERVATIONS = delete(ReservationRow)
_INSERT_RESERVATIONS = insert(ReservationRow)
_INSERT_USAGE = insert(BudgetUsageRow)
_USAGE = (
    update(BudgetUsageRow)
    .where(BudgetUsageRow.budget == bindparam("b_budget"))
    .values(usage=bindparam("b_usage"), as_of=bindparam("b_as_of"))
)


def persist(session: Session, changes: ChangeSet, now: Seconds) -> None:
    """Write `changes` in `session`'s transaction (`now`: when its intents were made)."""
    conn = session.connection()
    c = changes
    if c.opened:
        conn.execute(
            _INSERT_RUNS,
            [
                {
                    "id": r.run_id,
                    "job_id": r.job_id,
                    "attempt": r.attempt,
                    "started_at": r.started_at,
                    "placement": [{"node": a.node, "gpus": list(a.gpus)} for a in r.placement],
                    "run_class": r.run_class.value,
                    "slice_end": r.slice_end,
                    "rate_micro": r.rate,
                    "price": r.price,
                    "price_since": r.started_at,
                    "charged_until": r.started_at,
                    "backfill_for": r.backfill_for,
                }
                for r in c.opened
            ],
        )
    _many(conn, _SIGNAL, [{"b_id": s.run_id, "b_at": s.at, "b_kill": s.kill_at, "b_reason": s.reason,
                           "b_preemptor": s.preemptor, "b_requeue": s.requeue} for s in c.signalled])  # fmt: skip
    _many(conn, _METER, [{"b_id": rid, "b_price": m.price, "b_since": m.price_since, "b_until": m.charged_until}
                         for rid, m in c.meters.items()])  # fmt: skip
    _many(conn, _RECLASS, [{"b_id": rid, "b_v": rc.value} for rid, rc in c.reclassed.items()])
    _many(conn, _END, [{"b_id": e.run_id, "b_at": e.at, "b_code": e.exit_code, "b_reason": e.reason} for e in c.ended])
    _many(conn, _CONFIRM, [{"b_id": t.run_id, "b_v": t.confirmed_at} for t in c.touched if t.confirmed_at is not None])
    _many(
        conn,
        _IDLE,
        [{"b_id": t.run_id, "b_v": t.idle_since} for t in c.touched if t.idle_since is not None or t.clear_idle],
    )
    _many(conn, _CHECKPOINT, [{"b_id": t.run_id, "b_v": t.checkpoint_at, "b_every": t.checkpoint_every}
                              for t in c.touched if t.checkpoint_at is not None])  # fmt: skip
    _many(conn, _SLICE_END, [{"b_id": t.run_id, "b_v": t.slice_end} for t in c.touched if t.slice_end is not None])
    if c.transitions:
        moved = [t for t in c.transitions if t.attempt is None]
        started = [t for t in c.transitions if t.attempt is not None]
        _many(conn, _JOB_STATE, [{"b_id": t.job_id, "b_state": t.to_state.value, "b_why": t.why, "b_at": t.at}
                                 for t in moved])  # fmt: skip
        _many(conn, _JOB_STARTED, [{"b_id": t.job_id, "b_state": t.to_state.value, "b_why": t.why, "b_at": t.at,
                                    "b_attempt": t.attempt} for t in started])  # fmt: skip
        conn.execute(
            _INSERT_EVENTS,
            [{"job_id": t.job_id, "at": t.at, "from_state": t.from_state.value, "to_state": t.to_state.value,
              "reason": t.why} for t in c.transitions],
        )  # fmt: skip
    if c.entries:
        post_all(session, c.entries)
    if c.slices:
        conn.execute(
            _INSERT_SLICES,
            [
                {"run_id": s.run_id, "job_id": s.job_id, "start": s.start, "end": s.end, "kind": s.kind}
                for s in c.slices
            ],
        )
    if c.intents:
        rows: list[dict[str, Any]] = []
        for intent in c.intents:
            kind, job_id, attempt, run_id, payload = encode(intent)
            rows.append({"job_id": job_id, "run_id": run_id, "attempt": attempt, "kind": kind.value,
                         "payload": payload, "created_at": now, "delivered_at": None})  # fmt: skip
        conn.execute(_INSERT_INTENTS, rows)  # ids follow this order: delivery order
    if c.reasons:
        stmt = dialect_insert(session)(PendingReasonRow)
        values = [
            {
                "job_id": r.job_id,
                "blocker": r.blocker,
                "message": r.message,
                "needed_gpus": r.needed_gpus,
                "free_gpus": r.free_gpus,
                "estimated_start": r.estimated_start,
                "hints": [{"kind": k, "detail": d, "start": t} for k, d, t in r.hints],
                "at": r.at,
            }
            for r in c.reasons
        ]
        # one upsert for all changed rows (executemany), not one round trip each
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["job_id"], set_={k: getattr(stmt.excluded, k) for k in values[0] if k != "job_id"}
            ),
            values,
        )
    if c.reasons_gone:
        conn.execute(_DELETE_REASONS, {"ids": sorted(set(c.reasons_gone))})
    if c.reservations is not None:
        conn.execute(_DELETE_RESERVATIONS)
        if c.reservations:
            conn.execute(
                _INSERT_RESERVATIONS,
                [
                    {
                        "job_id": r.job_id,
                        "nodes": [[n, g] for n, g in r.nodes],
                        "planned_start": r.planned_start,
                        "kind": r.kind.value,
                        "since": r.since,
                        "gave_way": list(r.gave_way),
                    }
                    for r in c.reservations
                ],
            )
    new = [{"budget": u.budget, "usage": u.usage, "as_of": u.as_of} for u in c.usage if u.new]
    if new:
        conn.execute(_INSERT_USAGE, new)
    _many(conn, _USAGE, [{"b_budget": u.budget, "b_usage": u.usage, "b_as_of": u.as_of} for u in c.usage if not u.new])
    for key, value in c.state.items():
        set_state(session, key, value)


def _many(conn: Any, stmt: Any, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(stmt, rows)
