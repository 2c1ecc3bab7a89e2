"""`allot admin token`: the first administrator's token, issued on the server's host without HTTP.

Owns: the `admin` command group and its `token` command, which opens the server's database the way `allot server`
does (--config, --data-dir, --database-url or $ALLOT_DATABASE_URL; migrated and seeded from the configuration when
new), issues a token for a configured administrator through service.tokens.bootstrap_admin_token and prints the
secret once. Files it creates are private to the server's user (umask 077), as the server's are.

Must not: talk to a running server (whoever can read the database is trusted here; nobody else can call it) or
decide who is an administrator (the configuration does).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from allotment.cli.common import EXIT_CONFLICT, EXIT_INPUT, err, out

admin_app = typer.Typer(help="Administration on the server's host (direct database access, no HTTP).")

PRIVATE_UMASK = 0o077
"""Files and folders the server and these commands create are readable by their owner only: the database holds
token hashes and the environment of submitted jobs."""


def private_files() -> None:
    """Make every file this process creates from now on private to its user (0600 files, 0700 folders)."""
    os.umask(PRIVATE_UMASK)


@admin_app.command("token")
def admin_token(
    user: Annotated[str, typer.Option("--user", help="A configured administrator.")],
    config: Annotated[Path, typer.Option("--config", help="The server's configuration.")],
    data_dir: Annotated[Path, typer.Option("--data-dir", help="The server's data directory (its SQLite database).")] = (
        Path("data")
    ),
    db_url: Annotated[
        str | None,
        typer.Option(
            "--database-url", help="postgresql+psycopg://… when the server uses PostgreSQL (or $ALLOT_DATABASE_URL)."
        ),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="A label for the token.")] = "bootstrap",
    ttl: Annotated[str | None, typer.Option("--ttl", help="Lifetime (e.g. 8h, 30d); default 30 days.")] = None,
) -> None:
    """Issue an administrator's API token from the server's database and print it once.

    For the first administrator of a server without open login: run it on the server's host as the server's
    user, then `export ALLOT_TOKEN=…` (or `allot login --token …`) and issue the other tokens through the API."""
    from allotment.config import ConfigError, load_config
    from allotment.config.fields import parse_duration
    from allotment.engine.setup import Settings, database_url, seed
    from allotment.service.context import Context
    from allotment.service.errors import Conflict, ServiceError
    from allotment.service.tokens import bootstrap_admin_token
    from allotment.store.db import make_engine, session_factory
    from allotment.store.migrate import upgrade

    private_files()
    try:
        cfg = load_config(config)
    except ConfigError as error:
        err.print(f"✗ {config}: {escape(str(error))}")
        raise typer.Exit(EXIT_INPUT) from None
    try:
        lifetime = parse_duration(ttl) if ttl is not None else None
    except ValueError as error:
        err.print(f"✗ --ttl: {escape(str(error))}")
        raise typer.Exit(EXIT_INPUT) from None
    settings = Settings(config=config, data_dir=data_dir, database_url=db_url)
    engine = make_engine(database_url(settings))
    try:
        upgrade(engine)
        sessions = session_factory(engine)
        seed(sessions, cfg, int(time.time()))
        ctx = Context(sessions, cfg, data_dir, lambda: int(time.time()), max_tokens=settings.max_tokens)
        new = bootstrap_admin_token(ctx, user, name=name, ttl=lifetime)
    except ServiceError as error:  # not configured, not an administrator, or already at the cap on live tokens
        err.print(f"✗ {escape(error.message)}")
        raise typer.Exit(EXIT_CONFLICT if isinstance(error, Conflict) else EXIT_INPUT) from None
    finally:
        engine.dispose()
    err.print(f"token {new.token.id} for {user} (administrator), expires at {new.token.expires_at}; shown once:")
    out.print(new.secret, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(admin_app, name="admin")
