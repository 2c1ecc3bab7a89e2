"""API tokens: issuing, authenticating, listing and revoking bearer tokens.

Owns: the token format (`allot_` + 32 random bytes, URL-safe), storing only its SHA-256, expiry (30 days by
default), the cap on live tokens per user (Context.max_tokens: one more is a Conflict naming the fix), revocation,
`last_used_at` (refreshed at most once a minute, so reads stay cheap), login (who may obtain a token for whom) and
turning a presented token into the acting Principal. Authentication is cached per token digest for
AUTH_CACHE_SECONDS of wall time (a busy client's requests skip two reads); expiry is still checked against the clock
on every request, and a revocation through this process drops the cached entry at once (one revoked on another
instance stops working within AUTH_CACHE_SECONDS).

Trust model: users are configured, not self-registered. An administrator may issue a token for any configured user;
any user may issue further tokens for themselves (the API rate limits issuance per user through the `throttle` the
use cases call once the caller's right is established, so nobody spends another user's allowance); `login` without
credentials works only on a server started with open login (a local, single-user server, where whoever reaches the
port is trusted to be any configured user); the first administrator's token on a server without open login comes
from `allot admin token` on the server's host (`bootstrap_admin_token`).

Must not: keep a secret anywhere but in the response that creates it.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import func, select

from allotment.config.limits import MAX_TOKEN_NAME
from allotment.core.model import Seconds
from allotment.service.context import Context
from allotment.service.errors import Conflict, Forbidden, Invalid, NotFound, Unauthenticated
from allotment.service.principal import Principal, load_principal
from allotment.service.views import Me, NewToken, TokenView
from allotment.store.db import reading
from allotment.store.records import audit
from allotment.store.tables import ApiTokenRow, UserRow

PREFIX = "allot_"
TOUCH_EVERY: Seconds = 60
MAX_TTL: Seconds = 366 * 24 * 3600
AUTH_CACHE_SECONDS = 5.0
AUTH_CACHE_SIZE = 10_000


@dataclass(frozen=True, slots=True)
class _Known:
    principal: Principal
    token_id: str
    expires_at: Seconds
    until: float
    """time.monotonic() after which the entry is read again."""


_known: dict[tuple[int, str], _Known] = {}
_known_lock = threading.Lock()


def _forget(token_id: str) -> None:
    with _known_lock:
        for key in [k for k, v in _known.items() if v.token_id == token_id]:
            del _known[key]


def token_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _view(row: ApiTokenRow) -> TokenView:
    return TokenView(
        id=row.id,
        user=row.user,
        name=row.name,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        last_used_at=row.last_used_at,
    )


def issue(ctx: Context, user: str, *, name: str = "", ttl: Seconds | None = None, actor: str | None = None) -> NewToken:
    """A new token for a configured user (no rights are checked here: callers do)."""
    ttl = ctx.token_ttl if ttl is None else ttl
    if not 0 < ttl <= MAX_TTL:
        raise Invalid.of("ttl", f"must be between 1 second and {MAX_TTL} seconds")
    if len(name) > MAX_TOKEN_NAME:
        raise Invalid.of("name", f"must be at most {MAX_TOKEN_NAME} characters")
    now = ctx.now()
    secret = PREFIX + secrets.token_urlsafe(32)
    with ctx.sessions.begin() as session:
        if session.get(UserRow, user) is None:
            raise NotFound(f"no user {user!r} (users are configured)")
        live = session.scalar(
            select(func.count())
            .select_from(ApiTokenRow)
            .where(ApiTokenRow.user == user, ApiTokenRow.revoked_at.is_(None), ApiTokenRow.expires_at > now)
        )
        if (live or 0) >= ctx.max_tokens:
            raise Conflict(
                f"{user} already holds {live} live tokens, the most this server allows (max_tokens "
                f"{ctx.max_tokens}): revoke unused ones (allot token revoke ID, or DELETE /auth/tokens/ID) or wait "
                "for them to expire"
            )
        row = ApiTokenRow(
            id="t-" + uuid.uuid4().hex[:12],
            user=user,
            name=name or "token",
            token_hash=token_hash(secret),
            created_at=now,
            expires_at=now + ttl,
            revoked_at=None,
            last_used_at=None,
        )
        session.add(row)
        session.flush()
        audit(
            session,
            at=now,
            actor=actor or user,
            action="token.create",
            target=f"user:{user}",
            detail={"token": row.id, "expires_at": row.expires_at},
        )
        view = _view(row)
    return NewToken(token=view, secret=secret)


Throttle = Callable[[str], None]
"""Called with the user a token is for, once the caller may have it; raises to refuse (a rate limit)."""


def _unthrottled(_user: str) -> None:
    return None


def create_token(
    ctx: Context,
    principal: Principal,
    user: str,
    *,
    name: str = "",
    ttl: Seconds | None = None,
    throttle: Throttle = _unthrottled,
) -> NewToken:
    """Administrators issue tokens for anyone; a user for themselves."""
    if user != principal.user and not principal.admin:
        raise Forbidden(f"{principal.user} may not issue tokens for {user}: administrators only")
    throttle(user)
    return issue(ctx, user, name=name, ttl=ttl, actor=principal.user)


def login(
    ctx: Context,
    principal: Principal | None,
    user: str,
    *,
    name: str = "",
    ttl: Seconds | None = None,
    throttle: Throttle = _unthrottled,
) -> NewToken:
    """A token for `user`: with an administrator's token, with the user's own token, or with no credentials on a
    server started with open login."""
    if principal is None:
        if not ctx.open_login:
            raise Unauthenticated("login needs an administrator's token (this server does not allow open login)")
        throttle(user)
        return issue(ctx, user, name=name or "login", ttl=ttl, actor=user)
    return create_token(ctx, principal, user, name=name or "login", ttl=ttl, throttle=throttle)


def authenticate_cached(ctx: Context, secret: str) -> Principal | None:
    """`authenticate` without touching the database: the principal when this process checked the token in the
    last AUTH_CACHE_SECONDS, else None (call `authenticate`). Raises Unauthenticated as `authenticate` does."""
    if not secret.startswith(PREFIX):
        raise Unauthenticated("not an Allotment token")
    known = _known.get((id(ctx), token_hash(secret)))
    if known is None or time.monotonic() >= known.until:
        return None
    if known.expires_at <= ctx.now():
        raise Unauthenticated("the token has expired")
    return known.principal


def authenticate(ctx: Context, secret: str) -> Principal:
    """The principal a bearer token stands for; Unauthenticated if it is unknown, expired or revoked."""
    cached = authenticate_cached(ctx, secret)
    if cached is not None:
        return cached
    now = ctx.now()
    digest = token_hash(secret)
    key = (id(ctx), digest)
    with reading(ctx.sessions) as session:
        row = session.scalars(select(ApiTokenRow).where(ApiTokenRow.token_hash == digest)).first()
        if row is None:
            raise Unauthenticated("unknown token")
        if row.revoked_at is not None:
            raise Unauthenticated("the token was revoked")
        if row.expires_at <= now:
            raise Unauthenticated("the token has expired")
        principal = load_principal(session, row.user)
        stale = row.last_used_at is None or row.last_used_at + TOUCH_EVERY <= now
        token_id, expires_at = row.id, row.expires_at
    with _known_lock:
        if len(_known) >= AUTH_CACHE_SIZE:
            _known.clear()
        _known[key] = _Known(principal, token_id, expires_at, time.monotonic() + AUTH_CACHE_SECONDS)
    if stale:
        with ctx.sessions.begin() as session:
            fresh = session.get(ApiTokenRow, token_id)
            if fresh is not None:
                fresh.last_used_at = now
    return principal


def list_tokens(ctx: Context, principal: Principal, user: str | None = None) -> list[TokenView]:
    """The caller's own tokens (an administrator may ask for another user's)."""
    target = user or principal.user
    if target != principal.user and not principal.admin:
        raise Forbidden(f"{principal.user} may not list {target}'s tokens")
    with reading(ctx.sessions) as session:
        rows = session.scalars(
            select(ApiTokenRow).where(ApiTokenRow.user == target).order_by(ApiTokenRow.created_at, ApiTokenRow.id)
        )
        return [_view(r) for r in rows]


def revoke_token(ctx: Context, principal: Principal, token_id: str) -> TokenView:
    now = ctx.now()
    with ctx.sessions.begin() as session:
        row = session.get(ApiTokenRow, token_id)
        if row is None:
            raise NotFound(f"no token {token_id!r}")
        if row.user != principal.user and not principal.admin:
            raise Forbidden(f"{principal.user} may not revoke {row.user}'s token")
        _forget(row.id)
        if row.revoked_at is None:
            row.revoked_at = now
            audit(
                session,
                at=now,
                actor=principal.user,
                action="token.revoke",
                target=f"user:{row.user}",
                detail={"token": row.id},
            )
        return _view(row)


def whoami(principal: Principal) -> Me:
    return Me(user=principal.user, admin=principal.admin, operator=principal.operator, roles=dict(principal.roles))


def bootstrap_admin_token(ctx: Context, user: str, *, name: str = "", ttl: Seconds | None = None) -> NewToken:
    """The first administrator's token, issued on the server's host with direct database access (`allot admin
    token`): no HTTP and no credentials, so only someone who can read the server's database may call it. The user
    must be an administrator in the configuration; the cap on live tokens applies as to any issue."""
    with reading(ctx.sessions) as session:
        principal = load_principal(session, user) if session.get(UserRow, user) is not None else None
    if principal is None:
        raise NotFound(f"no user {user!r}: add them under `users:` in the configuration (users are configured)")
    if not principal.admin:
        raise Forbidden(
            f"{user} is not an administrator: give them the admin role on a budget in the configuration "
            f"(members: [{{user: {user}, role: admin}}]) and run this again"
        )
    return issue(ctx, user, name=name or "bootstrap", ttl=ttl, actor=f"{user} (allot admin token)")
