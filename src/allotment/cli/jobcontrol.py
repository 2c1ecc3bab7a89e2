"""`allot cancel` (by id, or by --user/--budget/--state/--name like scancel -u/-A/-t/-n), `allot hold` and
`allot release` (scontrol hold/uhold/release), `allot update` (scontrol update job), `allot requeue` (scontrol
requeue, requeuehold): job control, through the SDK.

Owns: each job-control command's options and how its answer is printed.
Must not: talk HTTP itself (the SDK does), decide who may do what (the server does) or render tables (`render`).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from allotment.cli import arrays, render
from allotment.cli.common import JsonOption, api_call, client, dump, fail, out
from allotment.cli.jobs import slurm_time
from allotment.sdk import models as m


def cancel(
    jobs: Annotated[
        list[str] | None,
        typer.Argument(help="Job ids (sessions too: this releases them; an array's id: all its tasks); or filters."),
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
        done: list[m.JobSummary | m.ArrayControl] = []
        for job_id in jobs or []:
            if arrays.is_array_id(job_id):
                done.append(control := api.cancel_array(job_id))
                if not as_json:
                    arrays.print_control(out, control)
                continue
            done.append(one := api.cancel(job_id))
            if not as_json:
                out.print(f"[green]✓[/green] cancel requested for {job_id} ({one.state})")
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
    jobs: Annotated[list[str], typer.Argument(help="Pending job ids to hold (an array's id: its pending tasks).")],
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
    done: list[m.JobSummary | m.ArrayControl] = []
    with api_call(), client() as api:
        for job_id in jobs:
            if arrays.is_array_id(job_id):
                done.append(control := api.hold_array(job_id, kind=kind))
                if not as_json:
                    arrays.print_control(out, control)
                continue
            done.append(one := api.hold(job_id, kind=kind))
            if not as_json:
                out.print(f"[green]✓[/green] {job_id} held ({one.hold} hold)")
    if as_json:
        dump(done)


def release(
    jobs: Annotated[list[str], typer.Argument(help="Held job ids to release (an array's id: its held tasks).")],
    as_json: JsonOption = False,
) -> None:
    """Release held jobs (scontrol release): the scheduler considers them again. Only an administrator releases an
    admin hold."""
    done: list[m.JobSummary | m.ArrayControl] = []
    with api_call(), client() as api:
        for job_id in jobs:
            if arrays.is_array_id(job_id):
                done.append(control := api.release_array(job_id))
                if not as_json:
                    arrays.print_control(out, control)
                continue
            done.append(api.release(job_id))
            if not as_json:
                out.print(f"[green]✓[/green] {job_id} released")
    if as_json:
        dump(done)


def update(
    job: Annotated[str, typer.Argument(help="The pending job to update.")],
    priority: Annotated[
        int | None, typer.Option("--priority", help="Order within the budget only (-1000…1000).")
    ] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-g", help="GPUs per replica.")] = None,
    replicas: Annotated[int | None, typer.Option("--replicas", "-r", help="Replicas of the gang.")] = None,
    time_limit: Annotated[
        str | None, typer.Option("--time", "-t", help="Time limit: 8h, 90m, or sbatch's 1-12:00:00 forms.")
    ] = None,
    slice_: Annotated[str | None, typer.Option("--slice", help="Run slice asked for, e.g. 30m, 2h.")] = None,
    gpu_types: Annotated[
        str | None, typer.Option("--gpu-types", help="Allowed GPU types, comma-separated; any: every type.")
    ] = None,
    clusters: Annotated[
        str | None, typer.Option("--clusters", help="Allowed clusters, comma-separated; any: every cluster.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="A new name.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Update a pending job (scontrol update job): `allot update JOB --priority 5 --gpus 4 --time 2h`. The job as
    updated must pass every check a submission passes, or nothing changes; a running job cannot be updated (requeue
    it with --hold first). Prints each field's before → after."""
    asked: dict[str, Any] = {"priority": priority, "gpus": gpus, "replicas": replicas, "name": name}
    if time_limit is not None:
        asked["max_runtime"] = slurm_time(time_limit)
    if slice_ is not None:
        asked["slice"] = slice_
    if gpu_types is not None:
        asked["gpu_types"] = _choices(gpu_types)
    if clusters is not None:
        asked["clusters"] = _choices(clusters)
    if all(v is None for v in asked.values()):
        fail(
            "give something to change: --priority, --gpus, --replicas, --time, --slice, --gpu-types, --clusters, --name"
        )
    with api_call(), client() as api:
        result = api.update(job, **asked)
    if as_json:
        dump(result)
        return
    if not result.changes:
        out.print(f"[dim]{job} unchanged: it already asks for that[/dim]")
        return
    out.print(f"[green]✓[/green] {job} updated")
    for change in result.changes:
        out.print(f"  {change.field}: {escape(_shown(change.field, change.before))} → "
                  f"{escape(_shown(change.field, change.after))}")  # fmt: skip


def _choices(text: str) -> list[str]:
    """`h100,b200` as a list; `any` (or nothing) allows every one."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    return [] if items in ([], ["any"]) else items


def _shown(field: str, value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "any"
    if field in ("slice", "max_runtime") and isinstance(value, int):
        return render.ago(value)
    return str(value)


def requeue(
    jobs: Annotated[list[str], typer.Argument(help="Running job ids to requeue.")],
    hold: Annotated[
        bool,
        typer.Option("--hold", "-H", help="Put them back held (scontrol requeuehold); allot release lets them run."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Requeue running jobs (scontrol requeue): the scheduler stops each run with its grace (SIGTERM, then SIGKILL)
    and puts the job back in the queue with the same id; what it ran stays charged. Sessions are not requeued."""
    done: list[m.JobSummary] = []
    with api_call(), client() as api:
        for job_id in jobs:
            done.append(api.requeue(job_id, hold=hold))
            if not as_json:
                then = f"held ({done[-1].hold} hold)" if hold else "pending"
                out.print(
                    f"[green]✓[/green] requeue requested for {job_id}: it stops with its grace, then waits {then}"
                )
    if as_json:
        dump(done)


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel)
    app.command("hold")(hold)
    app.command("release")(release)
    app.command("update")(update)
    app.command("requeue")(requeue)
