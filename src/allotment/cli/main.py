"""The `allot` command line: configuration checks and a demo of one scheduling cycle.

Owns: the Typer application (`app`, the console script `allot`), its commands and options, finding the example
configuration, exit codes (0 fine, 2 invalid configuration or input) and choosing between tables and JSON.

Must not: contain scheduling rules (the core decides), workload generation (see `sample`) or rendering details
(see `views`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from allotment.cli import admin as admin_commands
from allotment.cli import jobcontrol as jobcontrol_commands
from allotment.cli import jobs as jobs_commands
from allotment.cli import manage as manage_commands
from allotment.cli import simulate as simulate_commands
from allotment.cli.sample import default_now, default_pending, sample_snapshot
from allotment.cli.views import config_summary, decisions_data, print_config_summary, print_decisions, print_problems
from allotment.config import AllotmentConfig, ConfigError, load_config

EXAMPLE = Path("examples") / "ai2" / "allotment.yaml"

app = typer.Typer(
    name="allot",
    help="Allotment: GPU scheduling with budgets, hierarchical fair share and time-slicing contracts.",
    no_args_is_help=True,
    add_completion=False,
)
config_app = typer.Typer(help="Work with Allotment configuration files.", no_args_is_help=True)
app.add_typer(config_app, name="config")
jobs_commands.register(app)  # submit, run, session, queue, status, why, logs, history
jobcontrol_commands.register(app)  # cancel (by id or filter), hold, release, update, requeue
manage_commands.register(app)  # budget …, node …, login, whoami, usage
simulate_commands.register(app)  # simulate (issue 6)
admin_commands.register(app)  # admin token (the first administrator's token, on the server's host)


def example_config() -> Path | None:
    """The repository's examples/ai2/allotment.yaml, next to the package's checkout or under the current directory."""
    for base in (Path(__file__).resolve().parents[3], Path.cwd()):
        candidate = base / EXAMPLE
        if candidate.is_file():
            return candidate
    return None


def _load(console: Console, path: Path) -> AllotmentConfig:
    try:
        return load_config(path)
    except ConfigError as error:
        print_problems(console, error)
        raise typer.Exit(code=2) from None


@config_app.command("check")
def config_check(
    path: Annotated[Path, typer.Argument(help="A YAML file, or a directory of YAML files whose sections merge.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary or the problems as JSON.")] = False,
) -> None:
    """Validate a configuration and summarise it, or list every problem with its field path and line."""
    console = Console(soft_wrap=as_json)
    try:
        cfg = load_config(path)
    except ConfigError as error:
        if as_json:
            problems = [{"path": p.path, "file": p.file, "line": p.line, "reason": p.reason} for p in error.problems]
            typer.echo(json.dumps({"valid": False, "problems": problems}, indent=2))
        else:
            print_problems(console, error)
        raise typer.Exit(code=2) from None
    summary = config_summary(cfg)
    if as_json:
        typer.echo(json.dumps({"valid": True, **summary}, indent=2))
    else:
        print_config_summary(console, str(path), summary)


def _parse_now(value: str | None, cfg: AllotmentConfig) -> int:
    if value is None:
        return default_now(cfg)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an ISO 8601 datetime", param_hint="--now") from None
    if moment.tzinfo is None:
        raise typer.BadParameter("give a timezone, e.g. 2026-11-11T14:00:00Z", param_hint="--now")
    return int(moment.timestamp())


@app.command()
def demo(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="Configuration (default: examples/demo; with --snapshot: the repository's examples/ai2)."
        ),
    ] = None,
    one_cycle: Annotated[
        bool,
        typer.Option(
            "--snapshot",
            help="Instead: one scheduling cycle on a sample snapshot (implied by --jobs, --seed, --pending, --now, "
            "--json).",
        ),
    ] = False,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", "--ci", help="Exit after the scripted part instead of serving until Ctrl-C.")
    ] = False,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where the demo keeps its data (default: a fresh temporary one).")
    ] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="API port on 127.0.0.1 (0: a free one).")] = 0,
    jobs: Annotated[
        int | None, typer.Option("--jobs", min=0, help="--snapshot: pending jobs to list with their reasons (20).")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="--snapshot: seed of the sample workload (1).")] = None,
    pending: Annotated[
        int | None, typer.Option("--pending", min=0, help="Pending jobs in the sample (default: GPUs / 2).")
    ] = None,
    now: Annotated[
        str | None, typer.Option("--now", help="The cycle's instant, ISO 8601 (default: day 10 of the period).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decisions as JSON.")] = False,
) -> None:
    """Run Allotment for real, about 90 s: a server with a virtual fleet and a scripted workload shown live.

    You see starts, a preemption at a slice end, a session starting in a full cluster and budgets burning down; then
    the server keeps running until Ctrl-C so you can explore it with the CLI (--no-wait exits instead).

    With --snapshot: one scheduling cycle on a deterministic sample workload, and its decisions."""
    if not (one_cycle or as_json or any(v is not None for v in (jobs, seed, pending, now))):
        _live_demo(config, data_dir=data_dir, port=port, wait=not no_wait)
        return
    from allotment.core.cycle import AllotmentPolicy  # only the demo needs the policy: keep `config` fast

    jobs, seed = (20 if jobs is None else jobs), (1 if seed is None else seed)
    console = Console()
    path = config if config is not None else example_config()
    if path is None:
        console.print(f"[red]✗[/red] cannot find {EXAMPLE}; pass --config PATH")
        raise typer.Exit(code=2)
    cfg = _load(console, path)
    instant = _parse_now(now, cfg)
    count = default_pending(cfg) if pending is None else pending
    snapshot = sample_snapshot(cfg, seed=seed, now=instant, pending=count)
    decisions = AllotmentPolicy().decide(snapshot, instant)
    data = decisions_data(snapshot, decisions, instant, jobs)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        print_decisions(console, data, limit=max(jobs, 10))


def _live_demo(config: Path | None, *, data_dir: Path | None, port: int, wait: bool) -> None:
    from allotment.cli.livedemo import DEMO_CONFIG, demo_config, missing_names, run_demo

    console = Console()
    path = config if config is not None else demo_config()
    if path is None:
        console.print(f"[red]✗[/red] cannot find {DEMO_CONFIG}; pass --config PATH")
        raise typer.Exit(code=2)
    missing = missing_names(_load(console, path))
    if missing:
        console.print(f"[red]✗[/red] the demo's workload needs {', '.join(missing)} in {path}")
        raise typer.Exit(code=2)
    raise typer.Exit(code=run_demo(path.resolve(), data_dir=data_dir, port=port, wait=wait, console=console))


@app.command("server")
def server_command(
    config: Annotated[Path | None, typer.Option(help="Configuration (default: the repository's examples/ai2).")] = None,
    data_dir: Annotated[Path, typer.Option(help="Where the SQLite database, logs and executor state live.")] = Path(
        "data"
    ),
    database_url: Annotated[
        str | None, typer.Option(help="postgresql+psycopg://… for PostgreSQL (default: SQLite in --data-dir).")
    ] = None,
    executor: Annotated[str, typer.Option(help="Where jobs run: local (processes on this host).")] = "local",
    interval: Annotated[float, typer.Option(help="Seconds between cycles when nothing happens.")] = 5.0,
    host: Annotated[str, typer.Option(help="Address the HTTP API listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port of the HTTP API (0: any free port).")] = 8642,
    open_login: Annotated[
        bool,
        typer.Option(
            "--open-login",
            help="Let `allot login` get a token for any configured user without credentials "
            "(a local, single-user server only; needs a loopback --host).",
        ),
    ] = False,
    allow_remote_http: Annotated[
        bool,
        typer.Option(
            "--allow-remote-http",
            help="Serve plain HTTP on a non-loopback --host. Tokens then cross the network in clear text unless a "
            "TLS proxy is the only way in (docs/operations.md).",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host name the API answers besides the bound address and the loopback names (e.g. the name "
            "your TLS proxy serves); repeat for several, or set ALLOT_ALLOWED_HOSTS=a,b. Other Host headers get 400.",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Largest request body the API reads; a larger one gets 413 (default 1 MiB, or $ALLOT_MAX_BODY_BYTES).",
        ),
    ] = None,
    run_as: Annotated[
        str | None,
        typer.Option(
            "--run-as",
            help="Whose Unix account jobs run as: owner (each job its owner's; needs root), single-user (the "
            "server's own) or auto (owner when root). Default: the configuration's run_as.mode (single-user).",
        ),
    ] = None,
    api_workers: Annotated[
        int,
        typer.Option(
            min=0,
            max=64,
            help="Serve the API from this many processes beside the engine's (0: on a thread of the engine's "
            'process). Per-user rate limits are split between them (docs/operations.md, "API workers").',
        ),
    ] = 0,
) -> None:
    """Run the scheduler and its HTTP API: migrate and seed the database, then cycle until SIGTERM or Ctrl-C."""
    if api_workers:
        from allotment.ops.metricsdir import share_metrics
        from allotment.ops.wake import wake_path

        try:
            wake_path(data_dir)
        except ValueError as error:
            Console(stderr=True).print(f"[red]✗[/red] {error}")
            raise typer.Exit(code=2) from None
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        share_metrics(data_dir)  # before anything imports prometheus_client
    import logging

    from rich.markup import escape

    from allotment.api import attach_api
    from allotment.api.workers import start_workers
    from allotment.cli.admin import private_files
    from allotment.engine.server import Server, serve
    from allotment.engine.setup import Settings
    from allotment.engine.setup import run_as as resolve_run_as
    from allotment.executors.accounts import RunAsError
    from allotment.ops.hardening import ANY, is_loopback

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    path = config or example_config()
    if path is None:
        Console(stderr=True).print("[red]no configuration given and examples/ai2 not found[/red]")
        raise typer.Exit(code=2)
    cfg = _load(Console(stderr=True), path)
    if open_login and not is_loopback(host):
        Console(stderr=True).print("[red]✗[/red] --open-login lets anyone act as any user: only with a loopback --host")
        raise typer.Exit(code=2)
    if not is_loopback(host) and not allow_remote_http:
        Console(stderr=True).print(
            f"[red]✗[/red] --host {escape(host)} serves plain HTTP beyond this machine, and bearer tokens with it. "
            "Keep the default --host 127.0.0.1 behind a TLS reverse proxy (docs/operations.md, "
            '"TLS behind a reverse proxy"), or pass --allow-remote-http if the network path is already protected.'
        )
        raise typer.Exit(code=2)
    hosts = Settings(config=path, data_dir=data_dir).allowed_hosts + tuple(allowed_host or ())  # env + options
    if open_login and ANY in hosts:
        Console(stderr=True).print("[red]✗[/red] --allowed-host '*' cannot be combined with --open-login")
        raise typer.Exit(code=2)
    private_files()  # the database holds token hashes and jobs' environments: 0600 files, 0700 folders
    settings = Settings(
        config=path, data_dir=data_dir, database_url=database_url, executor=executor, allowed_hosts=hosts, run_as=run_as
    )
    if max_body_bytes is not None:
        settings = replace(settings, max_body_bytes=max_body_bytes)
    try:
        mode = resolve_run_as(settings, cfg)
    except (RunAsError, ValueError) as error:
        Console(stderr=True).print(f"[red]✗[/red] {error}")
        raise typer.Exit(code=2) from None
    if open_login and mode.owner:
        Console(stderr=True).print("[red]✗[/red] --open-login lets anyone act as any user: not in owner mode")
        raise typer.Exit(code=2)
    Console(stderr=True).print(f"Jobs run in {mode.describe()}")

    def with_api(server: Server) -> Callable[[], None] | None:
        if api_workers:
            workers = start_workers(server, settings, host, port, api_workers, open_login=open_login)
            url, close = workers.url, workers.stop
        else:
            api = attach_api(server, host, port, settings=settings, open_login=open_login)
            url, close = api.url, None
        Console(stderr=True).print(f"API at {url} (docs: {url}/docs); export ALLOT_URL={url}")
        return close

    serve(settings, interval=interval, attach=with_api)


@app.command("attach")
def attach_command(
    job: Annotated[str, typer.Argument(help="The session's job id.")],
    command: Annotated[
        list[str] | None, typer.Argument(help="Run this command (after `--`) instead of an interactive shell.")
    ] = None,
    data_dir: Annotated[Path, typer.Option(help="The server's data directory (its executor state).")] = Path("data"),
) -> None:
    """Open a shell in a running session's environment (its GPUs, ALLOT_* variables and working directory) on this
    host; the session counts as attended while it runs. `allot attach JOB -- CMD ARGS…` runs one command instead."""
    from allotment.cli.attach import attach
    from allotment.executors.local.sessions import AttachError

    try:
        result = attach(data_dir / "executor", job, command or None)
    except AttachError as error:
        Console(stderr=True).print(f"[red]✗[/red] {error}")
        raise typer.Exit(code=2) from None
    if result.ended_by_session:
        Console(stderr=True).print(f"session {job} ended; detached")
    raise typer.Exit(code=result.exit_code)


if __name__ == "__main__":
    app()
