"""Service errors and request-validation failures as HTTP responses with a JSON body naming the field.

Owns: the status of each error kind (400 bad request, 401 unauthenticated, 403 forbidden, 404 not found, 409
conflict, 422 invalid) and the handlers the application installs.

Must not: decide whether something is an error (the service layer does).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

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

STATUS: dict[type[ServiceError], int] = {
    BadRequest: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Invalid: 422,
}

ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 422)
}


def error_response(status: int, body: ErrorBody) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(status_code=status, content=body.model_dump(), headers=headers)


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
        problems.append(Problem(field=".".join(loc), reason=str(e.get("msg", "invalid"))))
    message = "; ".join(f"{p.field}: {p.reason}" for p in problems) or "invalid request"
    return error_response(422, ErrorBody(error="invalid", message=message, problems=problems))


def install(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RequestValidationError, validation_error)
