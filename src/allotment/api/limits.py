"""Per-user limits of the HTTP API (decision 53): submissions and token issuance are rate limited by the user a
request acts as or asks a token for — never by token, so a user's many tokens share one bucket.

Owns: `Limits` (the deployment's buckets, on `app.state.limits`), the route dependencies `Submitter` (an
authenticated caller whose submission bucket had room: POST /jobs, POST /sessions) and `Planner` (a caller who may
change budgets at all, checked before a plan is parsed), and `token_throttle`, which service.tokens calls once the
caller's right to a token for that user is established (so nobody can spend another user's bucket). A refused
request raises ops.ratelimit.RateLimited (429 with Retry-After); the cap on live tokens per user is
service.tokens's.

Must not: hold rights rules (service.principal does) or keep a secret.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from allotment.api.auth import AsyncCaller, Caller
from allotment.engine.setup import Settings
from allotment.ops.ratelimit import TokenBuckets, spend
from allotment.service.errors import Forbidden
from allotment.service.principal import Principal


@dataclass(frozen=True, slots=True)
class Limits:
    submissions: TokenBuckets | None
    """Per user: jobs and sessions submitted."""
    tokens: TokenBuckets | None
    """Per user: tokens issued for them (login or POST /auth/tokens)."""

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            TokenBuckets(settings.submit_rate, settings.submit_burst) if settings.submit_rate > 0 else None,
            TokenBuckets(settings.token_rate, settings.token_burst) if settings.token_rate > 0 else None,
        )


def limits(request: Request) -> Limits:
    found = request.app.state.limits
    assert isinstance(found, Limits)
    return found


async def submitter(request: Request, caller: AsyncCaller) -> Principal:
    """The caller, once it is known they may submit somewhere and their submission bucket has room. Both checks
    are O(1) and run before the spec is parsed."""
    if not caller.may_submit_anywhere:
        raise Forbidden(f"{caller.user} may not submit: they are not a member of any budget")
    spend(limits(request).submissions, f"user:{caller.user}", f"submissions by {caller.user}")
    return caller


def planner(caller: Caller) -> Principal:
    """The caller, once it is known they may change some budget: administrators and budget leads. Runs before the
    plan is parsed or validated, so anyone else is refused at the cost of a token check."""
    caller.require_planner()
    return caller


def token_throttle(request: Request) -> Callable[[str], None]:
    """What service.tokens calls with the user a token is for, after the caller's right to it is checked."""
    buckets = limits(request).tokens

    def throttle(user: str) -> None:
        spend(buckets, f"user:{user}", f"tokens issued for {user}")

    return throttle


Submitter = Annotated[Principal, Depends(submitter)]
Planner = Annotated[Principal, Depends(planner)]
Throttle = Annotated[Callable[[str], None], Depends(token_throttle)]
