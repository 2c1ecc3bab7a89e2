"""Every failure of the HTTP API as one JSON shape, `{"error", "message", "problems": [{"field", "reason", "line"}]}`
(docs/api.md, "Errors").

Owns: the status of each service error kind (400 bad request, 401 unauthenticated, 403 forbidden, 404 not found,
409 conflict, 422 invalid), the `error` word of every status the API answers (those, and 405, 413, 429, 500, 503),
the error responses every operation declares in the OpenAPI description, and the handlers the application installs:
service errors, request-validation failures, Starlette's HTTPException (unknown paths, wrong methods, a body over
the limit) and a last resort for anything unexpected, which logs it with an incident id and answers 500 without
internals.

Must not: decide whether something is an error (the service layer does).
"""

from __future__ import annotations

import http
import logging
import secrets

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from allotment.api.schemas import ErrorBody, Problem
from allotment.service.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    ServiceError,
    Unauthenticated,
)

log = logging.getLogger("allotment.api")

STATUS: dict[type[ServiceError], int] = {
    BadRequest: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Invalid: 422,
}

KINDS: dict[int, str] = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    429: "rate_limited",
    500: "internal",
    503: "unavailable",
}
"""The `error` word of each status (any other status answers `http_<status>`)."""

_DESCRIBED = {
    400: "The request cannot be read (malformed JSON or YAML, both or neither of two alternatives)",
    401: "No valid bearer token",
    403: "The caller may not do this",
    404: "No such resource or endpoint",
    409: "The request contradicts the current state",
    413: "The request body is over the server's limit",
    422: "The request is well formed but its content is wrong: `problems` names each field",
    429: "Too many requests: retry after the Retry-After header's seconds",
    500: "An internal error (logged on the server with the incident id the message gives)",
    503: "The database is unavailable: retry after the Retry-After header's seconds",
}

ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorBody, "description": text} for code, text in _DESCRIBED.items()
}
"""The error responses every operation declares (the body is always ErrorBody)."""


def kind_of(status: int) -> str:
    return KINDS.get(status, f"http_{status}")


def error_response(status: int, body: ErrorBody, headers: dict[str, str] | None = None) -> JSONResponse:
    merged = dict(headers or {})
    if status == 401:
        merged.setdefault("WWW-Authenticate", "Bearer")
    return JSONResponse(status_code=status, content=body.model_dump(), headers=merged or None)


def service_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)
    problems = [Problem(field=p.field, reason=p.reason, line=p.line) for p in exc.problems]
    return error_response(status, ErrorBody(error=exc.kind, message=exc.message, problems=problems))


def validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, ErrorBody(error="bad_request", message="the request body is not valid JSON"))
    problems = []
    for e in errors:
        loc = [str(p) for p in e.get("loc", ()) if p not in ("body",)]
        reason = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        problems.append(Problem(field=".".join(loc), reason=reason))
    message = "; ".join(f"{p.field}: {p.reason}" for p in problems) or "invalid request"
    return error_response(422, ErrorBody(error="invalid", message=message, problems=problems))


def _http_message(request: Request, exc: HTTPException) -> str:
    detail = exc.detail if isinstance(exc.detail, str) else ""
    try:
        default = http.HTTPStatus(exc.status_code).phrase
    except ValueError:
        default = ""
    if detail and detail != default:
        return detail
    if exc.status_code == 404:
        return f"no such endpoint: {request.method} {request.url.path} (the API is described at /docs)"
    if exc.status_code == 405:
        return f"{request.method} is not allowed on {request.url.path} (the API is described at /docs)"
    return default or f"HTTP {exc.status_code}"


def http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's HTTPException (an unknown path, a wrong method, a body over the limit) in the error shape."""
    assert isinstance(exc, HTTPException)
    body = ErrorBody(error=kind_of(exc.status_code), message=_http_message(request, exc))
    return error_response(exc.status_code, body, dict(exc.headers or {}))


def internal_error(request: Request, exc: Exception) -> JSONResponse:
    """The last resort: log the failure under an incident id and answer 500 with nothing of its internals."""
    incident = secrets.token_hex(6)
    log.error(
        "internal error %s answering %s %r: %s",
        incident,
        request.method,
        request.url.path,
        type(exc).__name__,
        exc_info=exc,
    )
    message = f"internal error (incident {incident}): the server logged it; retrying may not help"
    return error_response(500, ErrorBody(error="internal", message=message))


def install(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, internal_error)
