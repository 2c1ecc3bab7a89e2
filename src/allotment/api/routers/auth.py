"""/auth: login, who am I, and the caller's tokens.

Owns: the HTTP shape of the token use cases. Must not: hold rules (service.tokens does).
"""

from __future__ import annotations

from fastapi import APIRouter

from allotment.api.auth import Caller, Ctx, MaybeCaller
from allotment.api.errors import ERROR_RESPONSES
from allotment.api.limits import Throttle
from allotment.api.schemas import LoginRequest, TokenRequest
from allotment.service import tokens
from allotment.service.views import Me, NewToken, TokenView

router = APIRouter(prefix="/auth", tags=["auth"], responses=ERROR_RESPONSES)


@router.post("/login", status_code=201, response_model=NewToken)
def login(body: LoginRequest, ctx: Ctx, caller: MaybeCaller, throttle: Throttle) -> NewToken:
    """A token for a configured user: with an administrator's token (or the user's own), or with no token on a
    server started with open login. The secret is shown once. Rate limited per user (429) and capped at the
    server's live tokens per user (409)."""
    return tokens.login(ctx, caller, body.user, name=body.name, ttl=body.ttl, throttle=throttle)


@router.get("/me", response_model=Me)
def me(caller: Caller) -> Me:
    return tokens.whoami(caller)


@router.post("/tokens", status_code=201, response_model=NewToken)
def create(body: TokenRequest, ctx: Ctx, caller: Caller, throttle: Throttle) -> NewToken:
    """Issue a token: administrators for anyone, users for themselves. Rate limited per user the token is for
    (429) and capped at the server's live tokens per user (409)."""
    return tokens.create_token(ctx, caller, body.user, name=body.name, ttl=body.ttl, throttle=throttle)


@router.get("/tokens", response_model=list[TokenView])
def list_tokens(ctx: Ctx, caller: Caller, user: str | None = None) -> list[TokenView]:
    return tokens.list_tokens(ctx, caller, user)


@router.delete("/tokens/{token_id}", response_model=TokenView)
def revoke(token_id: str, ctx: Ctx, caller: Caller) -> TokenView:
    return tokens.revoke_token(ctx, caller, token_id)
