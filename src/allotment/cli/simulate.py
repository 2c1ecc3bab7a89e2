"""`allot simulate`: run a scenario through several policies and write the evaluation report, or a what-if of a
budget plan over a recorded history.

Owns: the command's options, the Rich progress bar, choosing the report's output folder and the exit codes
(0 done, 2 invalid scenario, plan, history or saved runs), combining saved runs into one report. Must not: simulate,
compute metrics or render the report itself (allotment.sim does).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from allotment.config import ConfigError, load_config
from allotment.service.plan_check import ServiceError, check_plan_against
from allotment.sim import report, runfile
from allotment.sim.batch import Done, Task, run_all, run_task
from allotment.sim.scenario import ScenarioError, load_scenario, make_policy
from allotment.sim.seeds import SeedError, parse_seeds
from allotment.sim.whatif import WhatIfError, current_plan_data, load_history, load_plan, period_start, run_what_if


def _advance(bar: Progress, task: TaskID, fraction: float) -> None:
    bar.update(task, completed=fraction)


class StoreKind(StrEnum):
    MEMORY = "memory"
    SQLITE = "sqlite"


def _print_budgets(history: str, config: Path | None, days: float, skip: float) -> None:
    """The budgets of the organisation a history replays in, with their parents, allocations and jobs."""
    console = Console()
    try:
        hist = load_history(history, config, days, skip)
    except WhatIfError as exc:
        Console(stderr=True).print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(code=2) from None
    jobs: dict[str, int] = {}
    for j in hist.jobs:
        jobs[j.budget] = jobs.get(j.budget, 0) + 1
    table = Table("budget", "parent", "allocation (credits)", "jobs in the history", title=hist.label)
    for b in hist.data.get("budgets", []):
        table.add_row(
            str(b["name"]), str(b.get("parent") or "–"), str(b.get("allocation", 0)), str(jobs.get(b["name"], 0))
        )
    console.print(table)


def _what_if(
    console: Console, plan: Path, history: str, out: Path, config: Path | None, days: float, skip: float, seed: int
) -> tuple[Path, Path]:
    """Read the plan and the history, check the plan as `allot budget plan diff` would, then replay both plans."""
    try:
        parsed = load_plan(plan)
        hist = load_history(history, config, days, skip)
        with tempfile.TemporaryDirectory(prefix="allot-whatif-") as scratch:
            current = Path(scratch) / "current.yaml"
            current.write_text(yaml.safe_dump(current_plan_data(hist.data, parsed), sort_keys=False))
            cfg = load_config(current)
            _, diff = check_plan_against(plan.read_text(), cfg, period_start(parsed))
        console.print(f"the plan changes {len(diff.changes)} thing(s); replaying the current and the planned budgets")
        asked = None if history.startswith(("itp:", "philly:")) else days
        with Progress(
            TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), console=console
        ) as bar:
            ids = {name: bar.add_task(f"{name:>9} plan", total=1.0) for name in ("current", "proposed")}
            return run_what_if(
                parsed, hist, out, seed=seed, days=asked, progress=lambda name, f: bar.update(ids[name], completed=f)
            )
    except (WhatIfError, ConfigError) as exc:
        console.print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(code=2) from None
    except ServiceError as exc:
        console.print(f"[red]{escape(f'{plan}: {exc}')}[/red]", soft_wrap=True)
        raise typer.Exit(code=2) from None


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)


def simulate(
    scenario: Annotated[Path | None, typer.Argument(help="A scenario YAML file (examples/sim/).")] = None,
    policies: Annotated[
        str | None, typer.Option("--policies", help="Comma-separated policies (default: the scenario's list).")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for report.md, report.html and the plots.")] = Path(
        "sim-report"
    ),
    seed: Annotated[int | None, typer.Option("--seed", help="Override the scenario's seed.")] = None,
    seeds: Annotated[
        str | None,
        typer.Option("--seeds", help="Run each policy with these seeds (1-5, 1,3,9): means, 95 % intervals."),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", help="Policies x seeds run in this many worker processes.")] = 1,
    plan: Annotated[
        Path | None, typer.Option("--plan", help="What-if: a budget plan YAML for the next period.")
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            help="What-if: an Allotment database URL (sqlite:///…, postgresql+psycopg://…), or itp:PATH / philly:PATH.",
        ),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="What-if on a database: the organisation's configuration file.")
    ] = None,
    days: Annotated[float, typer.Option("--days", help="What-if: days of history to replay.")] = 30.0,
    list_budgets: Annotated[
        bool,
        typer.Option("--budgets", help="What-if: list the history's budgets to plan against, then stop."),
    ] = False,
    skip_days: Annotated[
        float, typer.Option("--skip-days", help="What-if on a trace: start this many days into it.")
    ] = 0.0,
    store: Annotated[
        StoreKind,
        typer.Option(
            "--store", help="Where simulated state is kept: memory (fast) or sqlite (the SQL store, in memory)."
        ),
    ] = StoreKind.MEMORY,
    combine: Annotated[
        str | None,
        typer.Option(
            "--combine",
            help="Comma-separated report folders of one scenario: one report from the runs each saved (runs.json).",
        ),
    ] = None,
) -> None:
    """Simulate SCENARIO under each policy and write a side-by-side report; or, with --plan and --history, replay a
    recorded history under a proposed budget plan and report each budget's expected share, waits and exhaustion."""
    console = Console(stderr=True)
    if list_budgets:
        if history is None:
            console.print("[red]--budgets lists the budgets of a --history: give one[/red]")
            raise typer.Exit(code=2)
        _print_budgets(history, config, days, skip_days)
        return
    if plan is not None or history is not None:
        if plan is None or history is None:
            console.print("[red]--plan and --history go together[/red]")
            raise typer.Exit(code=2)
        md, page = _what_if(console, plan, history, out, config, days, skip_days, seed or 1)
        console.print(f"wrote {md} and {page}")
        return
    if combine is not None:
        if scenario is not None:
            console.print("[red]--combine makes a report from saved runs: give it no SCENARIO[/red]")
            raise typer.Exit(code=2)
        _combine(console, combine, out)
        return
    if scenario is None:
        console.print("[red]give a SCENARIO file (or --plan and --history for a what-if)[/red]")
        raise typer.Exit(code=2)
    try:
        spec = load_scenario(scenario)
        names = [p.strip() for p in policies.split(",") if p.strip()] if policies else list(spec.policies)
        for n in names:
            make_policy(n)
        chosen = parse_seeds(seeds) if seeds is not None else [seed if seed is not None else spec.seed]
    except (ScenarioError, SeedError) as exc:
        console.print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(code=2) from None
    if jobs < 1:
        console.print("[red]--jobs: at least 1 worker process[/red]")
        raise typer.Exit(code=2)
    tasks = [Task(scenario, name, s, store.value) for name in names for s in chosen]
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        ids = {t: bar.add_task(f"{t.policy:>12} seed {t.seed}", total=1.0) for t in tasks}
        try:
            if jobs == 1:
                done = [run_task(t, partial(_advance, bar, ids[t])) for t in tasks]
            else:
                done = run_all(tasks, jobs, lambda d: bar.update(ids[d.task], completed=1.0))
        except ScenarioError as exc:
            bar.stop()
            console.print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
            raise typer.Exit(code=2) from None
    command = f"allot simulate {scenario} --policies {','.join(names)} --out {out}" + (
        f" --seeds {seeds}" if seeds is not None else f" --seed {seed}" if seed is not None else ""
    )
    runfile.save(out, f"Simulation: {spec.name}", scenario, done)
    _report(console, f"Simulation: {spec.name}", done, out, command)


def _report(console: Console, title: str, done: Sequence[Done], out: Path, command: str) -> None:
    """Write the report of these runs: policies in the order they first appear, each policy's seeds in order."""
    names = list(dict.fromkeys(d.task.policy for d in done))
    by_policy = {n: [(d.task.seed, d.metrics) for d in done if d.task.policy == n] for n in names}
    stats = [
        f"{d.task.policy} seed {d.task.seed}: {d.cycles:,} cycles, {d.events:,} events in {d.wall_seconds:.1f} s "
        f"({d.events / max(d.wall_seconds, 1e-9):,.0f} events/s)"
        for d in done
    ]
    first = [by_policy[n][0][1] for n in names]
    md, page = report.write(title, [*done[0].notes, *stats], first, out, command, seeds=by_policy)
    console.print(f"wrote {md} and {page}")


def _combine(console: Console, folders: str, out: Path) -> None:
    """`--combine`: one report from the runs.json of several report folders."""
    try:
        runs = runfile.combine([Path(f.strip()) for f in folders.split(",") if f.strip()])
    except runfile.RunFileError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(code=2) from None
    ordered = sorted(runs.runs, key=lambda d: d.task.seed)
    names = list(dict.fromkeys(d.task.policy for d in runs.runs))
    done = [d for n in names for d in ordered if d.task.policy == n]
    runfile.save(out, runs.title, Path(runs.scenario), done)
    _report(console, runs.title, done, out, f"allot simulate --combine {folders} --out {out}")
