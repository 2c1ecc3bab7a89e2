"""The operational layer of the HTTP API: latency metrics, 429 for a rate-limited request, and a 503 with
Retry-After while the database is unreachable.

Owns: `install(app)`, which mounts the pure-ASGI middleware `Observe` (every request's latency into
`allotment_api_request_seconds`, labelled by the matched route template, never the raw path, so label cardinality
stays bounded) and the handlers that turn `RateLimited` (raised by the per-user limits of allotment.api.limits) into
429 with Retry-After, a database connection failure into 503 and a validation error raised inside a route (input a
use case's stricter model refuses) into 422.

Must not: authenticate, authorise or decide anything about jobs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from allotment.ops.metrics import API_SECONDS, RATE_LIMITED
from allotment.ops.ratelimit import RateLimited, retry_after
from allotment.store.db import unavailable

log = logging.getLogger("allotment.api")


class Observe:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            API_SECONDS.labels(scope["method"], template, str(status[0])).observe(time.perf_counter() - start)


def rate_limited(_request: Request, exc: Exception) -> JSONResponse:
    """429 with Retry-After (whole seconds, rounded up) and the standard error body."""
    assert isinstance(exc, RateLimited)
    RATE_LIMITED.inc()
    body: dict[str, Any] = {"error": "rate_limited", "message": exc.message, "problems": []}
    return JSONResponse(status_code=429, content=body, headers={"Retry-After": retry_after(exc.wait)})


def database_error(_request: Request, exc: Exception) -> JSONResponse:
    """503 with Retry-After when the database cannot be reached (a restart, a failover), else 500."""
    if unavailable(exc):
        log.warning("database unavailable: %s", type(exc).__name__)
        body: dict[str, Any] = {"error": "unavailable", "message": "the database is unavailable: retry", "problems": []}
        return JSONResponse(status_code=503, content=body, headers={"Retry-After": "1"})
    log.error("database error: %s", type(exc).__name__, exc_info=exc)
    return JSONResponse(status_code=500, content={"error": "internal", "message": "internal error", "problems": []})


def invalid_input(_request: Request, exc: Exception) -> JSONResponse:
    """422 for input that passed a route's body schema but not the stricter model a use case validates it into."""
    assert isinstance(exc, ValidationError)
    problems = [
        {"field": ".".join(str(p) for p in e.get("loc", ())), "reason": str(e.get("msg", "invalid")), "line": None}
        for e in exc.errors()
    ]
    message = "; ".join(f"{p['field']}: {p['reason']}" for p in problems) or "invalid request"
    return JSONResponse(status_code=422, content={"error": "invalid", "message": message, "problems": problems})


def install(app: FastAPI) -> None:
    """Mount latency metrics, answer 429 for a rate-limited request and 503 while the database cannot be reached."""
    app.add_middleware(Observe)
    app.add_exception_handler(RateLimited, rate_limited)
    app.add_exception_handler(DBAPIError, database_error)
    app.add_exception_handler(ValidationError, invalid_input)
