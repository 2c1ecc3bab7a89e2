"""Health, readiness and metrics probes, without authentication.

Owns: /health (liveness, database reachability and the run-as mode: owner or single-user), /healthz (liveness: the
process answers), /readyz (ready to serve: the database answers, the engine — this instance's or the leader's —
finished a cycle within READY_WITHIN engine seconds, and this instance's role: leader, standby or starting) and
/metrics (Prometheus text). Must not: reveal anything about individual jobs or users (metrics are aggregates by
budget, class and state).
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from allotment.api.auth import Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.api.schemas import Health
from allotment.ops.metrics import CONTENT_TYPE, DatabaseCollector, exposition
from allotment.ops.state import PROCESS
from allotment.store.db import reading
from allotment.store.records import get_state

router = APIRouter(tags=["health"], responses={500: ERROR_RESPONSES[500]})
READY_WITHIN = 60
"""Engine seconds since the last cycle after which the scheduler counts as stalled (cycles run at least every
interval, 5 s by default)."""


@router.get("/health", response_model=Health)
def health(ctx: Ctx) -> Health:
    try:
        with reading(ctx.sessions) as session:
            session.execute(text("SELECT 1"))
        ok = True
    except SQLAlchemyError:
        ok = False
    return Health(status="ok" if ok else "degraded", time=ctx.now(), database=ok, run_as=ctx.run_as.mode.value)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: 200 while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "not ready: the body says why"}})
def readyz(ctx: Ctx, response: Response) -> dict[str, object]:
    """Readiness: 200 when the database answers and the scheduler cycled recently; 503 otherwise."""
    now = ctx.now()
    last: int | None = None
    try:
        with reading(ctx.sessions) as session:
            value = get_state(session, "last_cycle")
        database = True
        last = None if value is None else int(value)
    except SQLAlchemyError:
        database = False
    cycling = last is not None and now - last <= READY_WITHIN
    ready = database and cycling
    if not ready:
        response.status_code = 503
    return {
        "ready": ready,
        "database": database,
        "cycling": cycling,
        "last_cycle": last,
        "role": PROCESS.role.value,
        "time": now,
    }


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {}}}})
def metrics(ctx: Ctx) -> Response:
    """Prometheus metrics: cycles, queue depth, GPUs in use by budget and class, preemptions, drains, budget
    burn, API latency."""
    try:
        body = exposition(DatabaseCollector(ctx.sessions, ctx.now, lambda: ctx.period().id))
    except SQLAlchemyError:
        body = exposition(None)
    return Response(body, media_type=CONTENT_TYPE)
