"""Records that explain the system: the audit log, job state transitions and engine key/values.

Owns: audit() (who did what to what, and why), transition() (a job's state change together with its
job_events row, so every transition is recorded), and the engine_state key/value helpers.

Must not: decide whether an action or transition is allowed (the service and engine do).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from allotment.core.jobstate import FINAL, JobState
from allotment.core.model import Seconds
from allotment.store.accounts import dialect_insert
from allotment.store.tables import AuditRow, EngineStateRow, JobEventRow, JobRow

JOB_STATES: frozenset[str] = frozenset(JobState)
FINAL_STATES: frozenset[str] = FINAL


def audit(
    session: Session,
    *,
    at: Seconds,
    actor: str,
    action: str,
    target: str,
    why: str = "",
    detail: dict[str, Any] | None = None,
) -> AuditRow:
    row = AuditRow(at=at, actor=actor, action=action, target=target, detail=detail or {}, why=why)
    session.add(row)
    session.flush()
    return row


def audit_log(session: Session, *, target: str | None = None, limit: int = 100) -> list[AuditRow]:
    """The newest audit records first, optionally for one target."""
    stmt = select(AuditRow).order_by(AuditRow.at.desc(), AuditRow.id.desc()).limit(limit)
    if target is not None:
        stmt = stmt.where(AuditRow.target == target)
    return list(session.scalars(stmt))


def transition(session: Session, job: JobRow, to_state: str, at: Seconds, reason: str) -> JobEventRow:
    """Move `job` to `to_state` and record the transition. A final state is never left."""
    if to_state not in JOB_STATES:
        raise ValueError(f"unknown job state {to_state!r}")
    if job.state in FINAL_STATES and to_state != job.state:
        raise ValueError(f"job {job.id} is {job.state}; it cannot become {to_state}")
    event = JobEventRow(job_id=job.id, at=at, from_state=job.state, to_state=to_state, reason=reason)
    job.state, job.state_reason, job.updated_at = to_state, reason, at
    session.add(event)  # written at the next flush, with the cycle's other records (ids follow the order added)
    return event


def job_events(session: Session, job_id: str) -> list[JobEventRow]:
    return list(session.scalars(select(JobEventRow).where(JobEventRow.job_id == job_id).order_by(JobEventRow.id)))


_GET_STATE = select(EngineStateRow.value).where(EngineStateRow.key == bindparam("key"))
_SET_STATE: dict[str, Any] = {}


def get_state(session: Session, key: str, default: Any = None) -> Any:
    found = session.connection().execute(_GET_STATE, {"key": key}).first()  # engine_state is written with Core only
    return default if found is None else found[0]


def set_state(session: Session, key: str, value: Any) -> None:
    dialect = session.get_bind().dialect.name
    stmt = _SET_STATE.get(dialect)
    if stmt is None:  # built once per dialect: the engine writes a few keys every cycle
        insert = dialect_insert(session)(EngineStateRow)
        stmt = _SET_STATE[dialect] = insert.on_conflict_do_update(
            index_elements=["key"], set_={"value": insert.excluded.value}
        )
    session.connection().execute(stmt, {"key": key, "value": value})
