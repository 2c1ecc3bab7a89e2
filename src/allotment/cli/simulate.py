"""`allot simulate`: run a scenario through several policies and write the evaluation report, or a what-if of a
budget plan over a recorded history.

Owns: the command's options, the Rich progress bar, choosing the report's output folder and the exit codes
(0 done, 2 invalid scenario, plan or history). Must not: simulate, compute metrics or render the report itself
(allotment.sim does).
"""

from __future__ import annotations

import dataclasses
import tempfile
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn

from allotment.sim import metrics, report
from allotment.sim.runner import Simulation
from allotment.sim.scenario import ScenarioError, build_workload, load_scenario, make_policy
from allotment.sim.whatif import WhatIfError, run_what_if


def _advance(bar: Progress, task: TaskID, fraction: float) -> None:
    bar.update(task, completed=fraction)


class StoreKind(StrEnum):
    MEMORY = "memory"
    SQLITE = "sqlite"


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
    store: Annotated[
        StoreKind,
        typer.Option(
            "--store", help="Where simulated state is kept: memory (fast) or sqlite (the SQL store, in memory)."
        ),
    ] = StoreKind.MEMORY,
) -> None:
    """Simulate SCENARIO under each policy and write a side-by-side report; or, with --plan and --history, replay a
    recorded history under a proposed budget plan and report each budget's expected share, waits and exhaustion."""
    console = Console(stderr=True)
    if plan is not None or history is not None:
        if plan is None or history is None:
            console.print("[red]--plan and --history go together[/red]")
            raise typer.Exit(code=2)
        try:
            md, page = run_what_if(plan, history, out, config=config, days=days, seed=seed or 1)
        except WhatIfError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(code=2) from None
        console.print(f"wrote {md} and {page}")
        return
    if scenario is None:
        console.print("[red]give a SCENARIO file (or --plan and --history for a what-if)[/red]")
        raise typer.Exit(code=2)
    try:
        spec = load_scenario(scenario)
        names = [p.strip() for p in policies.split(",") if p.strip()] if policies else list(spec.policies)
        chosen = [make_policy(n) for n in names]
    except ScenarioError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(code=2) from None
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        workload = build_workload(spec, Path(scratch), seed)
        with Progress(
            TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), console=console
        ) as bar:
            for name, policy in zip(names, chosen, strict=True):
                task = bar.add_task(f"{name:>12}", total=1.0)
                options = dataclasses.replace(spec.options(seed), store=store.value)
                sim = Simulation(workload, policy, options, label=name)
                result = sim.run(partial(_advance, bar, task))
                bar.update(task, completed=1.0)
                results.append(result)
    computed = [metrics.compute(r) for r in results]
    stats = [
        f"{n}: {r.cycles:,} cycles, {r.events:,} events in {r.wall_seconds:.1f} s "
        f"({r.events / max(r.wall_seconds, 1e-9):,.0f} events/s)"
        for n, r in zip(names, results, strict=True)
    ]
    command = f"allot simulate {scenario} --policies {','.join(names)} --out {out}" + (
        f" --seed {seed}" if seed is not None else ""
    )
    md, page = report.write(f"Simulation: {spec.name}", [*workload.notes, *stats], computed, out, command)
    console.print(f"wrote {md} and {page}")
