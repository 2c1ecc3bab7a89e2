"""The operational layer of the HTTP API: latency metrics, per-token rate limiting of submissions, and a 503 with
Retry-After while the database is unreachable.

Owns: `install(app, limits)`, which mounts two pure-ASGI middlewares — `Observe` (every request's latency into
`allotment_api_request_seconds`, labelled by the matched route template, never the raw path, so label cardinality
stays bounded) and `LimitSubmissions` (POST /jobs beyond a token's bucket answers 429 with Retry-After before the
request is authenticated or parsed) — and the handlers that turn a database connection failure into 503 and a
validation error raised inside a route (input a use case's stricter model refuses) into 422.

Must not: authenticate, authorise or decide anything about jobs.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from allotment.ops.metrics import API_SECONDS, RATE_LIMITED
from allotment.ops.ratelimit import TokenBuckets, caller_key, retry_after
from allotment.store.db import unavailable

log = logging.getLogger("allotment.api")
LIMITED = {("POST", "/jobs")}


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


class LimitSubmissions:
    def __init__(self, app: ASGIApp, buckets: TokenBuckets) -> None:
        self.app, self.buckets = app, buckets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (scope["method"], scope["path"].rstrip("/")) in LIMITED:
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization")
            client = scope.get("client")
            key = caller_key(auth.decode("latin-1") if auth else None, client[0] if client else None)
            wait = self.buckets.take(key)
            if wait > 0:
                RATE_LIMITED.inc()
                body = json.dumps(
                    {
                        "error": "rate_limited",
                        "message": f"too many submissions with this token: retry in {wait:.2f}s",
                        "problems": [],
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 429,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"retry-after", retry_after(wait).encode()),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


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


def install(app: FastAPI, buckets: TokenBuckets | None) -> None:
    """Mount latency metrics and (when `buckets` is given) the submission rate limit, and answer 503 while the
    database cannot be reached."""
    if buckets is not None:
        app.add_middleware(LimitSubmissions, buckets=buckets)
    app.add_middleware(Observe)
    app.add_exception_handler(DBAPIError, database_error)
    app.add_exception_handler(ValidationError, invalid_input)
