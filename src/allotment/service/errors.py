"""The service layer's typed errors.

Owns: NotFound, Forbidden, Invalid (with field-level problems: field path, line, reason), Conflict, BadRequest and
Unauthenticated, which the API maps to 404, 403, 422, 409, 400 and 401.

Must not: know about HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One thing wrong with a request: the field (a dotted path, "" for the whole), the YAML line when the input
    was YAML text, and the reason."""

    field: str
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.field}: {self.reason}" if self.field else f"{where}{self.reason}"


class ServiceError(Exception):
    """Base of every error a use case raises on purpose."""

    kind = "error"

    def __init__(self, message: str, problems: Iterable[FieldProblem] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.problems: tuple[FieldProblem, ...] = tuple(problems)


class NotFound(ServiceError):
    kind = "not_found"


class Forbidden(ServiceError):
    """A known user acting outside their rights."""

    kind = "forbidden"


class Unauthenticated(ServiceError):
    """No valid credentials: a missing, unknown, expired or revoked token."""

    kind = "unauthenticated"


class Invalid(ServiceError):
    """The request is well formed but its content is wrong; `problems` says where and why."""

    kind = "invalid"

    @classmethod
    def of(cls, field: str, reason: str, line: int | None = None) -> Invalid:
        return cls(f"{field}: {reason}" if field else reason, [FieldProblem(field, reason, line)])


class Conflict(ServiceError):
    """The request contradicts the current state (a finished job, a stale plan, a reused idempotency key)."""

    kind = "conflict"


class BadRequest(ServiceError):
    """The request cannot be read (a malformed cursor, a YAML syntax error)."""

    kind = "bad_request"
