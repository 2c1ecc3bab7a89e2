"""Request and error bodies of the HTTP API (responses are the service layer's views).

Owns: the JSON shapes clients send (a job submission as a spec object or YAML text, node actions, plans, token and
login requests) and the error body every failure returns.

Must not: validate what the service layer validates (specs and plans are checked there, with lines).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from allotment.changes.dependency import MAX_DEPENDENCY_CHARS
from allotment.config.fields import Duration, FreeText, Name, Text
from allotment.config.limits import MAX_ARGS, MAX_ARRAY_CHARS, MAX_CHOICES, MAX_REQUEST_ID, MAX_TOKEN_NAME
from allotment.service.specs import Argument, Env, GpuCount

RequestId = Annotated[Text, Field(max_length=MAX_REQUEST_ID)]
TokenName = Annotated[Text, Field(max_length=MAX_TOKEN_NAME)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubmitRequest(_Body):
    """Give the spec either as an object (`spec`) or as YAML text (`yaml`, whose problems carry line numbers)."""

    spec: dict[str, Any] | None = None
    yaml: Text | None = None
    request_id: RequestId | None = None
    """Idempotency key (or send the Idempotency-Key header): a retry returns the job the first request created."""
    array: Annotated[Text, Field(max_length=MAX_ARRAY_CHARS)] | None = None
    """A job array's indices, e.g. `0-999%50`, overriding the spec's `array` (sbatch --array on the command line)."""
    dependency: Annotated[Text, Field(max_length=MAX_DEPENDENCY_CHARS)] | None = None
    """Replaces the spec's `dependency` (sbatch --dependency over an #SBATCH line), e.g. `afterok:j-1`."""


class SessionBody(_Body):
    budget: Name
    gpus: GpuCount = 1
    length: Duration | None = None
    """How long the session holds its GPUs (default: the policy's default_slice, at most session_max_length)."""
    grace: Duration | None = None
    """SIGTERM → SIGKILL notice when it ends (default: the policy's default_grace, at most max_grace)."""
    command: Annotated[list[Argument], Field(min_length=1, max_length=MAX_ARGS)] | None = None
    name: Name | None = None
    gpu_types: list[Name] = Field(default_factory=list, max_length=MAX_CHOICES)
    clusters: list[Name] = Field(default_factory=list, max_length=MAX_CHOICES)
    env: Env = Field(default_factory=dict)
    request_id: RequestId | None = None


class NodeAction(_Body):
    why: FreeText = ""
    force: bool = False
    """Drain only: every job leaves now and its owner is refunded (administrators only)."""


class PlanRequest(_Body):
    """Give the plan either as YAML text (`yaml`) or as an object (`plan`)."""

    yaml: Text | None = None
    plan: dict[str, Any] | None = None
    why: FreeText = ""
    """Why the plan is applied (recorded in the audit log); defaults to the plan's own `why`."""


class TokenRequest(_Body):
    user: Name
    name: TokenName = ""
    ttl: Duration | None = None
    """Lifetime (seconds or 30m, 8h, 30d); default 30 days."""


class LoginRequest(_Body):
    user: Name
    name: TokenName = ""
    ttl: Duration | None = None


class Problem(BaseModel):
    field: str
    reason: str
    line: int | None = None


class ErrorBody(BaseModel):
    error: str
    """bad_request (400) | unauthenticated (401) | forbidden (403) | not_found (404) | method_not_allowed (405) |
    conflict (409) | too_large (413) | invalid (422) | rate_limited (429) | internal (500) | unavailable (503)"""
    message: str
    problems: list[Problem] = Field(default_factory=list)


class Health(BaseModel):
    status: str
    time: int
    database: bool
    run_as: str = "single-user"
    """Whose Unix account jobs run as: `owner` (each job its owner's) or `single-user` (the server's own)."""
