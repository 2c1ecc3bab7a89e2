"""Request and error bodies of the HTTP API (responses are the service layer's views).

Owns: the JSON shapes clients send (a job submission as a spec object or YAML text, node actions, plans, token and
login requests) and the error body every failure returns.

Must not: validate what the service layer validates (specs and plans are checked there, with lines).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from allotment.config.fields import Duration, Name


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubmitRequest(_Body):
    """Give the spec either as an object (`spec`) or as YAML text (`yaml`, whose problems carry line numbers)."""

    spec: dict[str, Any] | None = None
    yaml: str | None = None
    request_id: str | None = None
    """Idempotency key (or send the Idempotency-Key header): a retry returns the job the first request created."""


class SessionBody(_Body):
    budget: Name
    gpus: int = 1
    length: Duration = 3600
    command: list[str] | None = None
    name: Name | None = None
    gpu_types: list[Name] = Field(default_factory=list)
    clusters: list[Name] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    request_id: str | None = None


class NodeAction(_Body):
    why: str = ""
    force: bool = False
    """Drain only: every job leaves now and its owner is refunded (administrators only)."""


class PlanRequest(_Body):
    """Give the plan either as YAML text (`yaml`) or as an object (`plan`)."""

    yaml: str | None = None
    plan: dict[str, Any] | None = None
    why: str = ""
    """Why the plan is applied (recorded in the audit log); defaults to the plan's own `why`."""


class TokenRequest(_Body):
    user: Name
    name: str = ""
    ttl: Duration | None = None
    """Lifetime (seconds or 30m, 8h, 30d); default 30 days."""


class LoginRequest(_Body):
    user: Name
    name: str = ""
    ttl: Duration | None = None


class Problem(BaseModel):
    field: str
    reason: str
    line: int | None = None


class ErrorBody(BaseModel):
    error: str
    """bad_request | unauthenticated | forbidden | not_found | conflict | invalid"""
    message: str
    problems: list[Problem] = Field(default_factory=list)


class Health(BaseModel):
    status: str
    time: int
    database: bool
    run_as: str = "single-user"
    """Whose Unix account jobs run as: `owner` (each job its owner's) or `single-user` (the server's own)."""
