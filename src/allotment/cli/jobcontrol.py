"""`allot cancel` (by id, or by --user/--budget/--state/--name like scancel -u/-A/-t/-n), `allot hold` and
`allot release` (scontrol hold/uhold/release): job control, through the SDK.

Owns: each job-control command's options and how its answer is printed.
Must not: talk HTTP itself (the SDK does), decide who may do what (the server does) or render tables (`render`).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from allotment.cli import render
from allotment.cli.common import JsonOption, api_call, client, dump, fail, out
from allotment.sdk import models as m


def cancel(
    jobs: Annotated[
        list[str] | None, typer.Argument(help="Job ids (sessions too: this releases them); or use the filters.")
    ] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Every active job of this user; me: yours.")] = None,
    budget: Annotated[str | None, typer.Option("--budget", "-b", help="… of this budget (scancel -A).")] = None,
    state: Annotated[
        list[str] | None, typer.Option("--state", "-s", help="… in this state: pending, running, preempting (repeat).")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", "-n", help="… with exactly this name (scancel -n).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With filters: list the jobs, cancel nothing.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Ask the scheduler to cancel jobs (running ones get SIGTERM and their grace): the ids given, or every active
    job matching all the filters given (a non-administrator's filters cover only their own jobs)."""
    filters = bool(user or budget or state or name)
    if jobs and filters:
        fail("give job ids or filters (--user, --budget, --state, --name), not both")
    if not jobs and not filters:
        fail("give job ids, or filters: --user, --budget, --state, --name (e.g. --user me --state pending)")
    if dry_run and not filters:
        fail("--dry-run goes with filters")
    with api_call(), client() as api:
        if filters:
            if user == "me":
                user = api.me().user
            report = api.cancel_matching(user=user, budget=budget, states=state or (), name=name, dry_run=dry_run)
            if as_json:
                dump(report)
            else:
                _print_report(report)
            return
        done: list[m.JobSummary] = []
        for job_id in jobs or []:
            done.append(api.cancel(job_id))
            if not as_json:
                out.print(f"[green]✓[/green] cancel requested for {job_id} ({done[-1].state})")
    if as_json:
        dump(done)


def _print_report(report: m.CancelReport) -> None:
    if not report.jobs:
        out.print("[dim]no active job matches[/dim]")
        return
    if report.dry_run:
        title = f"Would cancel {report.matched} jobs (dry run: nothing changed)"
    else:
        before = report.matched - report.requested
        title = f"Cancel requested for {report.requested} jobs" + (f" ({before} asked before)" if before else "")
    out.print(render.queue_table(report.jobs, title=escape(title), width=out.width))


def hold(
    jobs: Annotated[list[str], typer.Argument(help="Pending job ids to hold.")],
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="user (scontrol uhold) or admin (administrators only); default: admin for administrators, else user.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Hold pending jobs (scontrol hold): the scheduler does not consider them until they are released, and `allot
    why` and `allot queue` say which hold. Only pending jobs can be held."""
    if kind is not None and kind not in ("user", "admin"):
        fail(f"--kind must be user or admin, not {kind!r}")
    done: list[m.JobSummary] = []
    with api_call(), client() as api:
        for job_id in jobs:
            done.append(api.hold(job_id, kind=kind))
            if not as_json:
                out.print(f"[green]✓[/green] {job_id} held ({done[-1].hold} hold)")
    if as_json:
        dump(done)


def release(
    jobs: Annotated[list[str], typer.Argument(help="Held job ids to release.")],
    as_json: JsonOption = False,
) -> None:
    """Release held jobs (scontrol release): the scheduler considers them again. Only an administrator releases an
    admin hold."""
    done: list[m.JobSummary] = []
    with api_call(), client() as api:
        for job_id in jobs:
            done.append(api.release(job_id))
            if not as_json:
                out.print(f"[green]✓[/green] {job_id} released")
    if as_json:
        dump(done)


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel)
    app.command("hold")(hold)
    app.command("release")(release)
