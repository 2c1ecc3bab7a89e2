"""The application factory.

Owns: `create_app`, which builds the service Context (sessions, configuration, data directory, clock, wake event,
open login) and a FastAPI application with its OpenAPI description, error handlers, per-user limits, routers,
self-hosted docs and web hardening (Host allowlist, security headers).

Must not: start servers or threads (serve.py does) or hold rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from allotment.api import docs, errors
from allotment.api.limits import Limits
from allotment.api.routers import (
    arrays,
    auth,
    budgets,
    dashboard,
    health,
    jobcontrol,
    jobs,
    nodes,
    plans,
    reports,
    simreports,
)
from allotment.api.routers import sessions as session_routes
from allotment.config import AllotmentConfig, load_config
from allotment.engine.setup import Settings
from allotment.engine.setup import run_as as resolve_run_as
from allotment.executors.accounts import RunAs
from allotment.ops import bounds, hardening
from allotment.ops import http as ops_http
from allotment.service.context import Context, Wake
from allotment.service.intake import Intake
from allotment.web import mount as mount_dashboard

DESCRIPTION = """GPU scheduling with budgets, hierarchical fair share and time-slicing contracts.

Every endpoint but /health needs `Authorization: Bearer <token>`. Money is integer credit-microunits
(1 credit = 1,000,000 = one GPU-hour of the reference GPU type); times are Unix seconds."""


def create_app(
    sessions: sessionmaker[Session],
    settings: Settings,
    wake: Wake | None,
    now: Callable[[], int],
    *,
    config: AllotmentConfig | None = None,
    open_login: bool = False,
    allowed_hosts: Iterable[str] | None = None,
    run_as: RunAs | None = None,
) -> FastAPI:
    """The API over `sessions`. `settings` gives the configuration file (unless `config` is given), the data
    directory (where the local executor keeps job output) and the executor kind; `wake` is set after every request
    the engine must act on; `now` is the engine's clock. `open_login` lets POST /auth/login issue tokens without
    credentials: only for a local, single-user server. `allowed_hosts` are the Host names answered (others get
    400); None: any, except with open login, where only the loopback names are (ops.hardening). `run_as`: whose
    account jobs run as (default: resolved from `settings` and the configuration, as the engine does)."""
    config = config if config is not None else load_config(settings.config)
    run_as = run_as if run_as is not None else resolve_run_as(settings, config)
    if open_login and run_as.owner:
        raise ValueError("open login lets anyone act as any user: it is for a single-user server only, not owner mode")
    if allowed_hosts is None and open_login:
        allowed_hosts = hardening.allowed_hosts("127.0.0.1")
    hosts = frozenset(allowed_hosts) if allowed_hosts is not None else None
    if open_login and hosts is not None and hardening.ANY in hosts:
        raise ValueError("open login needs a Host allowlist: '*' would let any web page's script log in")
    ctx = Context(
        sessions=sessions,
        config=config,
        data_dir=settings.data_dir,
        now=now,
        wake=wake,
        open_login=open_login,
        executor=settings.executor,
        max_tokens=settings.max_tokens,
        run_as=run_as,
    )
    app = FastAPI(title="Allotment", version="0.1.0", description=DESCRIPTION, docs_url=None, redoc_url=None)
    app.state.context = ctx
    app.state.intake = Intake(ctx)
    errors.install(app)
    app.state.limits = Limits.of(settings)
    bounds.install(app, settings.max_body_bytes)
    ops_http.install(app)
    routers = (
        health,
        auth,
        jobcontrol,
        jobs,
        arrays,
        session_routes,
        budgets,
        plans,
        nodes,
        reports,
        simreports,
        dashboard,
    )
    for module in routers:
        app.include_router(module.router)
    docs.install(app)
    mount_dashboard(app)
    app.add_middleware(hardening.Harden, hosts=hosts)
    return app
