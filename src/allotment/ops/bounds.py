"""Bounded requests at the door: the request body size limit, and NUL bytes in the path or the query string.

Owns: `install(app, max_body)`, which mounts `BoundRequests`, a pure-ASGI middleware. A body whose Content-Length
is over the limit is refused with 413 before a byte of it is read; a body without Content-Length (chunked), or one
longer than it said, is counted as it streams in and refused with 413 as soon as it passes the limit, so the server
never holds more than the limit of any body. A path or query parameter holding a NUL byte is refused with 422
naming it, before any route sees it. Every answer is in the API's error shape (docs/api.md, "Errors").

Must not: parse bodies, know routes, or decide anything a route decides; the limits' numbers live in config.limits.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from allotment.config.limits import NUL_REASON


class BodyTooLarge(HTTPException):
    """Raised from `receive` when the body passes the limit: FastAPI re-raises an HTTPException met while reading a
    body, so the application's handler answers it in the error shape; BoundRequests answers it otherwise."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large_message(limit))


def too_large_message(limit: int) -> str:
    return (
        f"the request body is larger than this server's limit of {limit} bytes: send less "
        "(an operator sets the limit with `allot server --max-body-bytes`)"
    )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def nul_parameter(scope: Scope) -> str | None:
    """The name of the first part of the request (`path` or a query parameter) holding a NUL byte, or None."""
    if "\x00" in str(scope.get("path", "")):
        return "path"
    query = bytes(scope.get("query_string") or b"")
    if b"%00" not in query and b"\x00" not in query:
        return None
    for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if "\x00" in key or "\x00" in value:
            return key.replace("\x00", "\\0") or "query"
    return None


async def _answer(send: Send, status: int, error: str, message: str, problems: list[dict[str, object]]) -> None:
    body = json.dumps({"error": error, "message": message, "problems": problems}, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BoundRequests:
    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        where = nul_parameter(scope)
        if where is not None:
            problem: dict[str, object] = {"field": where, "reason": NUL_REASON, "line": None}
            await _answer(send, 422, "invalid", f"{where}: {NUL_REASON}", [problem])
            return
        limit = self.max_body
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _answer(send, 413, "too_large", too_large_message(limit), [])
            return
        received = 0
        started = False

        async def counting(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        try:
            await self.app(scope, bounded, counting)
        except BodyTooLarge:
            if started:
                raise
            await _answer(send, 413, "too_large", too_large_message(limit), [])


def install(app: FastAPI, max_body: int) -> None:
    """Refuse request bodies over `max_body` bytes (413) and NUL bytes in paths and query strings (422)."""
    app.add_middleware(BoundRequests, max_body=max_body)
