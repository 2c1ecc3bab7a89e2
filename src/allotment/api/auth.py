"""Authentication for the HTTP API: bearer tokens, turned into the acting Principal.

Owns: the FastAPI dependencies that read the service Context from the application and the `Authorization: Bearer`
header (401 when it is missing, unknown, expired or revoked), and the optional variant login uses.

Must not: decide rights (the service layer does, and answers 403).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from allotment.service.context import Context
from allotment.service.errors import Unauthenticated
from allotment.service.principal import Principal
from allotment.service.tokens import authenticate, authenticate_cached

bearer = HTTPBearer(auto_error=False, description="An Allotment API token (allot_…)")


async def context(request: Request) -> Context:
    ctx = request.app.state.context
    assert isinstance(ctx, Context)
    return ctx


Ctx = Annotated[Context, Depends(context)]


def optional_principal(
    ctx: Ctx, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal | None:
    if credentials is None:
        return None
    if credentials.scheme.lower() != "bearer":
        raise Unauthenticated("use an Authorization: Bearer token")
    return authenticate(ctx, credentials.credentials)


def principal(found: Annotated[Principal | None, Depends(optional_principal)]) -> Principal:
    if found is None:
        raise Unauthenticated("missing bearer token: send Authorization: Bearer <token> (see allot login)")
    return found


Caller = Annotated[Principal, Depends(principal)]


async def principal_on_loop(
    ctx: Ctx, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    """`principal` for async routes: a token checked in the last second is answered on the event loop; otherwise
    the database is read in the thread pool."""
    if credentials is None:
        raise Unauthenticated("missing bearer token: send Authorization: Bearer <token> (see allot login)")
    if credentials.scheme.lower() != "bearer":
        raise Unauthenticated("use an Authorization: Bearer token")
    found = authenticate_cached(ctx, credentials.credentials)
    if found is None:
        found = await run_in_threadpool(authenticate, ctx, credentials.credentials)
    return found


AsyncCaller = Annotated[Principal, Depends(principal_on_loop)]
MaybeCaller = Annotated[Principal | None, Depends(optional_principal)]
