"""The `allot` command line: configuration checks and a demo of one scheduling cycle.

Owns: the Typer application (`app`, the console script `allot`), its commands and options, finding the example
configuration, exit codes (0 fine, 2 invalid configuration or input) and choosing between tables and JSON.

Must not: contain scheduling rules (the core decides), workload generation (see `sample`) or rendering details
(see `views`).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

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
        Path | None, typer.Option("--config", help="Configuration (default: the repository's examples/ai2).")
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=0, help="Pending jobs to list with their reasons.")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample workload.")] = 1,
    pending: Annotated[
        int | None, typer.Option("--pending", min=0, help="Pending jobs in the sample (default: GPUs / 2).")
    ] = None,
    now: Annotated[
        str | None, typer.Option("--now", help="The cycle's instant, ISO 8601 (default: day 10 of the period).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decisions as JSON.")] = False,
) -> None:
    """Run one scheduling cycle of the Allotment policy on a deterministic sample workload and show its decisions."""
    from allotment.core.cycle import AllotmentPolicy  # only the demo needs the policy: keep `config` fast

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


if __name__ == "__main__":
    app()


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
) -> None:
    """Run the scheduler: migrate and seed the database, then cycle until SIGTERM or Ctrl-C."""
    import logging

    from allotment.engine.server import serve
    from allotment.engine.setup import Settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    path = config or example_config()
    if path is None:
        Console(stderr=True).print("[red]no configuration given and examples/ai2 not found[/red]")
        raise typer.Exit(code=2)
    _load(Console(stderr=True), path)
    serve(Settings(config=path, data_dir=data_dir, database_url=database_url, executor=executor), interval=interval)
