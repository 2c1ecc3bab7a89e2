"""The SDK's one exception: ApiError, carrying the HTTP status and the API's error body.

Owns: turning a failed HTTP exchange (an error response, or no response at all) into an ApiError with the status,
the API's error kind (`bad_request`, `unauthenticated`, `forbidden`, `not_found`, `method_not_allowed`, `conflict`,
`too_large`, `invalid`, `rate_limited`, `internal`, `unavailable`: docs/api.md, "Errors"), its message and the list
of problems (field, line, reason).

Must not: print, exit or retry: callers decide what a failure means to them.
"""

from __future__ import annotations

import httpx

from allotment.sdk.models import Problem

UNREACHABLE = "unreachable"
"""The `error` of an ApiError raised when no HTTP response came back (status 0)."""


class ApiError(Exception):
    """A request the API refused (status ≥ 400), or one that never reached it (status 0, error `unreachable`)."""

    def __init__(self, status: int, error: str, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.problems: list[Problem] = list(problems or [])

    @property
    def is_bad_input(self) -> bool:
        """The request's content was rejected (400, 413 or 422): fixing the input, not retrying, helps."""
        return self.status in (400, 413, 422)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.error!r}, {self.message!r}, problems={len(self.problems)})"

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            problems = [Problem.model_validate(p) for p in body.get("problems") or [] if isinstance(p, dict)]
            return cls(response.status_code, str(body.get("error", "error")), body["message"], problems)
        text = response.text.strip()[:500] or response.reason_phrase
        return cls(response.status_code, "error", f"HTTP {response.status_code}: {text}")

    @classmethod
    def unreachable(cls, url: str, error: Exception) -> ApiError:
        return cls(0, UNREACHABLE, f"cannot reach the Allotment API at {url}: {error}")
