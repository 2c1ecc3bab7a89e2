"""`allot budget …`, `allot node …`, `allot login`, `allot whoami` and `allot usage`: budgets and the budgeting
process, node operations, signing in, and usage reports, all through the SDK.

Owns: the `budget` (with its `plan` subgroup) and `node` command groups, `login` (a token from the server, saved to
the config file) and their options.

Must not: talk HTTP itself (the SDK does), apply rules (the server does) or render tables (`render`).
"""

from __future__ import annotations

import getpass
import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from allotment.cli import render
from allotment.cli.common import JsonOption, api_call, client, dump, out, read_text
from allotment.sdk import Client, config_path, resolve, write_config

budget_app = typer.Typer(help="Budgets: the tree, one budget, and budget plans.", no_args_is_help=True)
plan_app = typer.Typer(help="The budgeting process: diff and apply a period's budget plan.", no_args_is_help=True)
node_app = typer.Typer(help="Nodes: list, cordon, drain and resume (operators).", no_args_is_help=True)
budget_app.add_typer(plan_app, name="plan")

WhyOption = Annotated[str, typer.Option("--why", help="Why (recorded in the audit log).")]


@budget_app.command("tree")
def budget_tree(
    root: Annotated[str | None, typer.Option("--root", help="Only this budget's subtree.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Every budget with its allocation, used and remaining credit this period (rolled up)."""
    with api_call(), client() as api:
        tree = api.budgets(root)
    if as_json:
        dump(tree)
    else:
        out.print(render.budget_table(tree))


@budget_app.command("show")
def budget_show(
    name: Annotated[str, typer.Argument(help="The budget.")],
    as_json: JsonOption = False,
) -> None:
    """One budget: allocation, used, remaining, run-out forecast (the last 24 h's rate), members, capacity windows."""
    with api_call(), client() as api:
        detail = api.budget(name)
    if as_json:
        dump(detail)
    else:
        out.print(render.budget_detail(detail))


@budget_app.command("charges")
def budget_charges(
    name: Annotated[str, typer.Argument(help="The budget (its subtree's charges).")],
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000, help="Ledger entries to read.")] = 2000,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Continue from an earlier answer's next_cursor.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The budget's charges, newest first, as lines: GPUs × time × rate = credits (raw ledger memos in --json)."""
    with api_call(), client() as api:
        page = api.charge_lines(name, limit=limit, cursor=cursor)
    if as_json:
        dump(page)
        return
    out.print(render.charge_lines_table(page.items, f"Charges of {name} (newest first)", budget_column=True))
    if page.next_cursor:
        out.print(f"[dim]older: allot budget charges {name} --cursor {page.next_cursor}[/dim]")


@plan_app.command("diff")
def plan_diff(
    path: Annotated[Path, typer.Argument(help="The budget plan (YAML; docs/api.md, 'Budget plans').")],
    as_json: JsonOption = False,
) -> None:
    """What a budget plan would change. Nothing is written."""
    text = read_text(path)
    with api_call(), client() as api:
        diff = api.plan_diff(yaml=text)
    if as_json:
        dump(diff)
    elif not diff.changes:
        out.print(f"[green]✓[/green] {path}: no changes for period {diff.period}")
    else:
        out.print(render.plan_table(diff.changes, f"{len(diff.changes)} changes for period {diff.period}"))


@plan_app.command("apply")
def plan_apply(
    path: Annotated[Path, typer.Argument(help="The budget plan (YAML).")],
    why: WhyOption = "",
    as_json: JsonOption = False,
) -> None:
    """Apply a budget plan atomically (all of it or nothing), recorded in the audit log with --why."""
    text = read_text(path)
    with api_call(), client() as api:
        applied = api.plan_apply(yaml=text, why=why)
    if as_json:
        dump(applied)
        return
    out.print(render.plan_table(applied.changes, f"Applied {len(applied.changes)} changes to period {applied.period}"))
    out.print(f"[green]✓[/green] applied by {applied.actor} at {render.clock(applied.applied_at)}; "
              f"audit record {applied.audit_id}")  # fmt: skip


@node_app.command("list")
def node_list(
    cluster: Annotated[str | None, typer.Option("--cluster", help="Only this cluster.")] = None,
    state: Annotated[str | None, typer.Option("--state", help="ready, cordoned, draining or down.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Nodes with their state, free GPUs and the jobs on them."""
    with api_call(), client() as api:
        nodes = api.nodes(cluster=cluster, state=state)
        rooms = [c.room for c in api.fleet(cluster=cluster).clusters if c.room is not None] if not as_json else []
    if as_json:
        dump(nodes)
    else:
        out.print(render.node_table(nodes))
        for room in rooms:
            out.print(f"session room  {escape(render.room_text(room))}")


@node_app.command("cordon")
def node_cordon(name: Annotated[str, typer.Argument()], why: WhyOption = "", as_json: JsonOption = False) -> None:
    """Nothing new lands on the node; what runs there stays."""
    with api_call(), client() as api:
        node = api.cordon(name, why)
    if as_json:
        dump(node)
    else:
        out.print(f"[green]✓[/green] {node.name} is {node.state}; {len(node.jobs)} jobs stay")


@node_app.command("drain")
def node_drain(
    name: Annotated[str, typer.Argument()],
    why: WhyOption = "",
    force: Annotated[
        bool, typer.Option("--force", help="Every job leaves now and its owner is refunded (administrators).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Empty a node without negotiation: opportunistic work leaves now, contracted work at its slice end."""
    with api_call(), client() as api:
        drained = api.drain(name, why, force=force)
    if as_json:
        dump(drained)
        return
    node = drained.node
    out.print(f"[green]✓[/green] {node.name} is {node.state}{' (forced)' if node.forced else ''}; "
              f"empty by {render.clock(drained.empty_by)}")  # fmt: skip
    for j in node.jobs:
        leaves = j.kill_at or j.slice_end
        out.print(f"  • {j.job_id} ({j.user}/{j.budget}, {j.gpus} GPUs, {j.run_class}) leaves {render.clock(leaves)}")


@node_app.command("resume")
def node_resume(name: Annotated[str, typer.Argument()], why: WhyOption = "", as_json: JsonOption = False) -> None:
    """Put a cordoned or drained node back into service."""
    with api_call(), client() as api:
        node = api.resume(name, why)
    if as_json:
        dump(node)
    else:
        out.print(f"[green]✓[/green] {node.name} is {node.state}")


def login(
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Who to log in as (default: your login name).")
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="The server (default: ALLOT_URL or the saved one).")] = None,
    token: Annotated[str | None, typer.Option("--token", help="Save this existing token instead of asking.")] = None,
    ttl: Annotated[str | None, typer.Option("--ttl", help="Token lifetime, e.g. 8h, 30d.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Get a token from the server (an administrator's token, your own, or a server with open login) and save it in
    ~/.config/allot/config.toml, where every `allot` command and the SDK find it."""
    settings = resolve(url, None)
    with api_call():
        if token is None:
            name = user or os.environ.get("USER") or getpass.getuser()
            with Client(settings.url, settings.token) as anon:
                token = anon.login(name, name=f"allot login on {os.uname().nodename}", ttl=ttl).secret
        with Client(settings.url, token) as api:
            me = api.me()
    path = write_config(settings.url, token, me.user)
    if as_json:
        dump({"url": settings.url, "user": me.user, "config": str(path), "token": token})
        return
    roles = ", ".join(f"{r} of {b}" for b, r in sorted(me.roles.items())) or "no budget roles"
    out.print(f"[green]✓[/green] logged in to {escape(settings.url)} as [bold]{me.user}[/bold] ({roles})")
    out.print(f"  [dim]token saved to {path}[/dim]")


def whoami(as_json: JsonOption = False) -> None:
    """Who the current token belongs to, and their roles."""
    with api_call(), client() as api:
        me = api.me()
        url = api.base_url
    if as_json:
        dump(me)
        return
    flags = [f for f, on in (("admin", me.admin), ("operator", me.operator)) if on]
    out.print(f"{me.user} at {escape(url)}" + (f" ({', '.join(flags)})" if flags else ""))
    for budget, role in sorted(me.roles.items()):
        out.print(f"  {role:8} {budget}")
    if not me.roles:
        out.print(f"  [dim]no budget roles (config: {config_path()})[/dim]")


def usage(
    budget: Annotated[str | None, typer.Option("--budget", "-b", help="Only this budget.")] = None,
    period: Annotated[list[str] | None, typer.Option("--period", help="Period id YYYY-MM-DD (repeat).")] = None,
    as_json: JsonOption = False,
) -> None:
    """GPU-hours, charges and refunds by budget, period and GPU type (default: the current period)."""
    with api_call(), client() as api:
        report = api.usage(period=period, budget=budget)
    if as_json:
        dump(report)
        return
    table = Table(title=f"Usage, periods {', '.join(report.periods)}", title_justify="left")
    for column in ("budget", "period", "GPU type", "GPU-hours", "charged", "refunded", "net credits"):
        table.add_column(column, justify="left" if column in ("budget", "period", "GPU type") else "right")
    for r in report.rows:
        table.add_row(
            r.budget,
            r.period,
            r.gpu_type,
            f"{r.gpu_seconds / 3600:,.3f}",
            render.credits(r.charged_micro, 3),
            render.credits(r.refunded_micro, 3),
            render.credits(r.net_micro, 3),
        )
    out.print(table)
    if report.windows:
        out.print(render.windows_table(report.windows, "Capacity windows: booked, used and unused GPU-hours"))
    out.print(f"[dim]as of {time.strftime('%H:%M:%S')}[/dim]")


def register(app: typer.Typer) -> None:
    app.add_typer(budget_app, name="budget")
    app.add_typer(node_app, name="node")
    app.command("login")(login)
    app.command("whoami")(whoami)
    app.command("usage")(usage)
