"""/health: liveness and database reachability, without authentication.

Owns: the health probe. Must not: reveal anything about jobs, budgets or users.
"""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from allotment.api.auth import Ctx
from allotment.api.schemas import Health
from allotment.store.db import reading

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
def health(ctx: Ctx) -> Health:
    try:
        with reading(ctx.sessions) as session:
            session.execute(text("SELECT 1"))
        ok = True
    except SQLAlchemyError:
        ok = False
    return Health(status="ok" if ok else "degraded", time=ctx.now(), database=ok)
