"""`allot submit | run | session | queue | status | why | logs` (and `history`, from `cli.history`): the job
commands, all through the SDK (`cancel`, `update` and `requeue` are in `cli.jobcontrol`).

Owns: each command's options, building the quick-form spec of `allot run` (the argv after `--` kept verbatim) and
the session request of `allot session` (its wait: `cli.session_wait`), following logs, and paginating the queue.

Must not: talk HTTP itself (the SDK does), validate specs (the server does, with lines) or render tables (`render`).
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.markup import escape

from allotment.cli import arrays, render, session_wait
from allotment.cli.common import EXIT_API, JsonOption, api_call, client, dump, fail, out, read_text
from allotment.core.jobstate import FINAL
from allotment.sdk import Client
from allotment.sdk import models as m

SLICE_DEFAULT = "Default: the server's policy (default_slice within min_slice…max_slice; the reply shows it)."
LENGTH_DEFAULT = "Default: the server's policy (default_slice, at most session_max_length)."
GRACE_DEFAULT = "Default: the server's policy (default_grace, at most max_grace; the reply shows it)."
ARRAY_HELP = (
    "A job array (sbatch --array): task indices like 0-999 or 1,3,5-9:2, with %N for at most N at once; each task"
    " is a job <array>_<index> and sees ALLOT_ARRAY_INDEX."
)
ATTACH_HINT = "allot attach {job} --data-dir <the server's data directory>   (on the server's host)"


DependencyOption = Annotated[
    str | None,
    typer.Option(
        "--dependency",
        "-d",
        help="Start only after other jobs (sbatch -d): afterok:JOB[:JOB…], afterany, afternotok, after, singleton;"
        " parts joined by ',' (all) or '?' (any).",
    ),
]


def submit(
    path: Annotated[Path, typer.Argument(help="A job spec in YAML (docs/api.md, 'Job specs'); - reads stdin.")],
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Idempotency key: a retry returns the first job.")
    ] = None,
    array: Annotated[str | None, typer.Option("--array", "-a", help=ARRAY_HELP)] = None,
    dependency: DependencyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a job spec file. Problems are listed with their field and line; nothing is half-submitted.
    --dependency replaces the spec's `dependency` (as sbatch's option does an #SBATCH line)."""
    text = sys.stdin.read() if str(path) == "-" else read_text(path)
    with api_call(), client() as api:
        result = api.submit(yaml=text, request_id=request_id, array=array, dependency=dependency)
    _submitted(result, as_json)


def _submitted(result: m.Submitted, as_json: bool) -> None:
    if as_json:
        dump(result)
        return
    job = result.job
    verb = "submitted" if result.created else "already submitted (same request id)"
    out.print(f"[green]✓[/green] {verb} [bold]{job.id}[/bold] {escape(job.name)}: {render.gpus(job)} GPUs"
              f"{render.beside(job)} from "
              f"{job.budget}, {job.contract}" + (f", slice {render.ago(job.slice_seconds)}" if job.contract ==
              "guaranteed" else "") + f", grace {render.ago(job.grace)}")  # fmt: skip
    if result.array is not None:
        out.print(arrays.submitted_line(result))
        out.print(f"  [dim]allot status {result.array.id} · allot why {job.id} · allot cancel {result.array.id}[/dim]")
        return
    out.print(f"  [dim]allot status {job.id} · allot why {job.id} · allot logs -f {job.id}[/dim]")


def run(
    command: Annotated[
        list[str] | None, typer.Argument(help="The command and its arguments, after `--` (kept verbatim).")
    ] = None,
    budget: Annotated[str, typer.Option("--budget", "-b", help="The leaf budget that pays.")] = "",
    gpus: Annotated[int, typer.Option("--gpus", "-g", min=1, help="GPUs per replica.")] = 1,
    replicas: Annotated[int, typer.Option("--replicas", "-r", min=1, help="Replicas of a gang (all or none).")] = 1,
    name: Annotated[str | None, typer.Option("--name", help="Job name (default: the command's name).")] = None,
    slice_: Annotated[
        str | None, typer.Option("--slice", help=f"Run slice asked for, e.g. 30m, 2h. {SLICE_DEFAULT}")
    ] = None,
    opportunistic: Annotated[bool, typer.Option("--opportunistic", help="Run on idle capacity, cheaper.")] = False,
    fallback: Annotated[
        bool, typer.Option("--fallback", help="Run opportunistically while the budget cannot fund a slice.")
    ] = False,
    priority: Annotated[int, typer.Option("--priority", help="Order within the budget only (-1000…1000).")] = 0,
    grace: Annotated[
        str | None, typer.Option("--grace", help=f"SIGTERM → SIGKILL notice, e.g. 2m. {GRACE_DEFAULT}")
    ] = None,
    gpu_type: Annotated[list[str] | None, typer.Option("--gpu-type", help="Allowed GPU type (repeat).")] = None,
    cluster: Annotated[list[str] | None, typer.Option("--cluster", help="Allowed cluster (repeat).")] = None,
    cpus: Annotated[
        int, typer.Option("--cpus", "-c", min=0, help="CPUs per replica (sbatch --cpus-per-task). Default: none.")
    ] = 0,
    mem: Annotated[
        str | None, typer.Option("--mem", help="Memory per replica: 16G, 512M or MiB (sbatch --mem). Default: none.")
    ] = None,
    time_limit: Annotated[
        str | None,
        typer.Option("--time", "-t", help="Longest run, then the job is ended: 8h, 90m, or sbatch's 1-12:00:00 forms."),
    ] = None,
    image: Annotated[str | None, typer.Option("--image", help="Container image to run the command in.")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE for the job (repeat).")] = None,
    workdir: Annotated[str | None, typer.Option("--workdir", help="Working directory (default: this one).")] = None,
    no_requeue: Annotated[bool, typer.Option("--no-requeue", help="Do not requeue after a preemption.")] = False,
    hold: Annotated[
        bool, typer.Option("--hold", "-H", help="Submit it held (sbatch -H); `allot release JOB` lets it run.")
    ] = False,
    dependency: DependencyOption = None,
    request_id: Annotated[str | None, typer.Option("--request-id", help="Idempotency key.")] = None,
    array: Annotated[str | None, typer.Option("--array", "-a", help=ARRAY_HELP)] = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a command without a spec file: `allot run --gpus 8 --budget pretrain -- python train.py --lr 3e-4`."""
    if not command:
        fail("give the command after `--`, e.g. allot run --budget pretrain -- python train.py")
    if not budget:
        fail("give the budget that pays: --budget NAME")
    variables: dict[str, str] = {}
    for item in env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--env {item!r}: write KEY=VALUE")
        variables[key] = value
    contract: dict[str, Any] = {"class": "opportunistic" if opportunistic else "guaranteed"}
    if slice_ is not None:
        contract["slice"] = slice_
    if fallback:
        contract["fallback_opportunistic"] = True
    spec: dict[str, Any] = {
        "name": name or _name_of(command[0]),
        "budget": budget,
        "command": list(command),
        "resources": {"gpus": gpus, "replicas": replicas, "gpu_types": gpu_type or [], "clusters": cluster or []},
        "contract": contract,
        "priority": priority,
        "requeue": not no_requeue,
        "workdir": workdir or os.getcwd(),
    }
    if variables:
        spec["env"] = variables
    if grace is not None:
        spec["grace"] = grace
    if cpus:
        spec["resources"]["cpus"] = cpus
    if mem is not None:
        spec["resources"]["memory"] = mem
    if time_limit is not None:
        spec["max_runtime"] = slurm_time(time_limit)
    if image is not None:
        spec["image"] = image
    if hold:
        spec["hold"] = True
    if array is not None:
        spec["array"] = array
    if dependency is not None:
        spec["dependency"] = dependency
    with api_call(), client() as api:
        result = api.submit(spec, request_id=request_id)
    _submitted(result, as_json)


_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def slurm_time(value: str) -> str | int:
    """`--time` as sbatch reads it — minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS — in seconds; any other
    text (8h, 90m: the server's durations) is passed on for the server to read."""
    found = _SLURM_TIME.match(value.strip())
    if found is None:
        return value
    days, first, second, third = (int(g) if g is not None else None for g in found.groups())
    assert first is not None
    if days is not None:  # D-HH[:MM[:SS]]
        return ((days * 24 + first) * 60 + (second or 0)) * 60 + (third or 0)
    if third is not None:  # HH:MM:SS
        return (first * 60 + (second or 0)) * 60 + third
    if second is not None:  # MM:SS
        return first * 60 + second
    return first * 60  # minutes


def _name_of(program: str) -> str:
    base = Path(program).name.lower()
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in base).strip("-_")
    return cleaned[:40] or "job"


def session(
    budget: Annotated[str, typer.Option("--budget", "-b", help="The leaf budget that pays.")],
    gpus: Annotated[int, typer.Option("--gpus", "-g", min=1, help="GPUs (within the session limit).")] = 1,
    length: Annotated[
        str | None, typer.Option("--length", "-l", help=f"How long to hold them, e.g. 30m, 2h. {LENGTH_DEFAULT}")
    ] = None,
    grace: Annotated[str | None, typer.Option("--grace", help=f"SIGTERM → SIGKILL notice. {GRACE_DEFAULT}")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Session name.")] = None,
    gpu_type: Annotated[list[str] | None, typer.Option("--gpu-type", help="Allowed GPU type (repeat).")] = None,
    cluster: Annotated[list[str] | None, typer.Option("--cluster", help="Allowed cluster (repeat).")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait until the session has started.")] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="Give up waiting after this many seconds.")] = 600,
    as_json: JsonOption = False,
) -> None:
    """Request an interactive session, wait until it has started, and show how to attach."""
    with api_call(), client() as api:
        requested = api.request_session(
            budget, gpus=gpus, length=length, grace=grace, name=name, gpu_types=gpu_type or [], clusters=cluster or []
        )
        job_id, started = requested.job.id, time.monotonic()
        current = requested
        if wait and not requested.ready:
            current = session_wait.wait(api, requested, timeout=timeout)
    if as_json:
        dump(current)
        return
    if current.ready:
        out.print(f"[green]✓[/green] session {job_id} started after {time.monotonic() - started:.1f}s")
    out.print(render.session_panel(current, ATTACH_HINT.format(job=job_id)))
    if not current.ready and current.job.state in FINAL:
        raise typer.Exit(code=EXIT_API)


ACTIVE = frozenset({"pending", "running", "preempting"})
RUNNING = ("preempting", "running")


def queue(
    budget: Annotated[str | None, typer.Option("--budget", "-b", help="Only this budget.")] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user's jobs.")] = None,
    state: Annotated[list[str] | None, typer.Option("--state", "-s", help="Only jobs in this state (repeat).")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="batch or session.")] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only my jobs.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=500, help="Jobs per page.")] = 50,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue from a previous page.")] = None,
    all_pages: Annotated[bool, typer.Option("--all", help="Every page, not just the first.")] = False,
    format_: Annotated[
        str | None,
        typer.Option(
            "--format", "-o", help=f"Columns, comma-separated, of: {', '.join(render.QUEUE_COLUMNS)} (squeue -o)."
        ),
    ] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Redraw until Ctrl-C (squeue -i).")] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.5, max=3600, help="Seconds between redraws with --watch.")
    ] = 2.0,
    count: Annotated[
        int | None, typer.Option("--count", min=1, help="With --watch: stop after this many redraws.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The queue as `squeue --start` shows it: running jobs, then pending ones in scheduling order (by estimated
    start, then submission) with what blocks each and its estimated start. Pages cover the pending jobs; running
    ones come on the first page. A --state of a finished job lists every matching job newest first instead (for
    finished jobs see also `allot history`). --watch redraws it every --interval seconds (on a terminal in place;
    elsewhere one table after another) until Ctrl-C or --count redraws."""
    states = set(state or ())
    columns = render.DEFAULT_QUEUE_COLUMNS if format_ is None else tuple(c.strip() for c in format_.split(","))
    unknown = [c for c in columns if c not in render.QUEUE_COLUMNS]
    if unknown or not columns:
        fail(f"--format {format_!r}: unknown column {unknown[0] if unknown else ''!r}; "
             f"choose from {', '.join(render.QUEUE_COLUMNS)}")  # fmt: skip
    if watch and (as_json or cursor is not None or states - ACTIVE):
        fail("--watch shows the live queue: not with --json, --cursor or a finished --state")
    with api_call(), client() as api:
        if mine:
            user = api.me().user
        if states - ACTIVE:
            _listing(api, states=sorted(states), budget=budget, user=user, kind=kind, limit=limit, cursor=cursor,
                     all_pages=all_pages, as_json=as_json)  # fmt: skip
            return
        view = _ActiveQueue(api, states, budget, user, kind, limit, cursor, all_pages, columns)
        if watch:
            _watch(view, interval, count)
            return
        running, pending, total, next_cursor = view.fetch()
    if as_json:
        items = [j.model_dump(mode="json") for j in running] + [q.model_dump(mode="json") for q in pending]
        dump({"items": items, "pending_total": total, "next_cursor": next_cursor})
        return
    out.print(view.frame((running, pending, total, next_cursor)))


Fetched = tuple[list[m.JobSummary], list[m.QueuedJob], int, str | None]


@dataclass(frozen=True, slots=True)
class _ActiveQueue:
    """The active queue's query and how one reading of it is drawn (once, or every redraw of --watch)."""

    api: Client
    states: set[str]
    budget: str | None
    user: str | None
    kind: str | None
    limit: int
    cursor: str | None
    all_pages: bool
    columns: tuple[str, ...]

    def fetch(self) -> Fetched:
        api, budget, user, kind = self.api, self.budget, self.user, self.kind
        wanted = [s for s in RUNNING if not self.states or s in self.states]
        running: list[m.JobSummary] = []
        if wanted and self.cursor is None:
            running = list(api.iter_jobs(state=wanted, budget=budget, user=user, kind=kind, page_size=500))
            running.sort(key=lambda j: (j.updated_at, j.id))
        pending: list[m.QueuedJob] = []
        total, next_cursor = 0, None
        if not self.states or "pending" in self.states:
            page = api.pending(budget=budget, user=user, limit=self.limit, cursor=self.cursor)
            pending, total, next_cursor = list(page.items), page.total, page.next_cursor
            while self.all_pages and next_cursor is not None:
                page = api.pending(budget=budget, user=user, limit=self.limit, cursor=next_cursor)
                pending, next_cursor = pending + page.items, page.next_cursor
        if kind is not None:
            pending = [q for q in pending if q.kind == kind]
        return running, pending, total, next_cursor

    def frame(self, fetched: Fetched | None = None) -> RenderableType:
        running, pending, total, next_cursor = fetched if fetched is not None else self.fetch()
        if not running and not pending:
            return "[dim]no jobs match[/dim]"
        title = f"Queue ({len(running)} running, {total} pending; pending in scheduling order)"
        pending_lines = arrays.collapse(pending)  # one array's tasks that wait alike: one line, as squeue shows
        table = render.active_table(running, pending_lines, title=title, width=out.width, columns=self.columns)
        if not next_cursor:
            return table
        return Group(table, f"[dim]more: allot queue --cursor {next_cursor} (or --all)[/dim]")


def _watch(view: _ActiveQueue, interval: float, count: int | None) -> None:
    """Redraw the queue every `interval` seconds (Rich Live on a terminal; one frame after another elsewhere) until
    Ctrl-C (exit 0) or `count` frames."""
    shown = 0
    try:
        if out.is_terminal:
            with Live(view.frame(), console=out, auto_refresh=False, transient=False) as live:
                shown = 1
                while count is None or shown < count:
                    time.sleep(interval)
                    live.update(view.frame(), refresh=True)
                    shown += 1
            return
        while count is None or shown < count:
            if shown:
                time.sleep(interval)
            out.print(f"[dim]{time.strftime('%Y-%m-%d %H:%M:%S')} (every {interval:g}s)[/dim]")
            out.print(view.frame())
            shown += 1
    except KeyboardInterrupt:
        raise typer.Exit(code=0) from None


def _listing(
    api: Client,
    *,
    states: list[str],
    budget: str | None,
    user: str | None,
    kind: str | None,
    limit: int,
    cursor: str | None,
    all_pages: bool,
    as_json: bool,
) -> None:
    """Every job in `states`, newest first (GET /jobs), as before scheduling order existed for finished states."""
    if all_pages:
        items = list(api.iter_jobs(state=states, budget=budget, user=user, kind=kind, page_size=limit))
        page = m.JobPage(items=items, next_cursor=None)
    else:
        page = api.jobs(state=states, budget=budget, user=user, kind=kind, limit=limit, cursor=cursor)
    if as_json:
        dump(page)
        return
    if not page.items:
        out.print("[dim]no jobs match[/dim]")
        return
    counts: dict[str, int] = {}
    for j in page.items:
        counts[j.state] = counts.get(j.state, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    out.print(render.queue_table(page.items, title=f"Jobs ({summary})", width=out.width))
    if page.next_cursor:
        out.print(f"[dim]more: allot queue --cursor {page.next_cursor} (or --all)[/dim]")


def status(job: Annotated[str, typer.Argument(help="The job id, or an array's.")], as_json: JsonOption = False) -> None:
    """A job in full: its spec, state history, runs with their slices, and what it was charged. An array's id
    (scontrol show job ARRAY) shows how many of its tasks are in each state, and which."""
    if arrays.is_array_id(job):
        with api_call(), client() as api:
            array = api.array(job)
        if as_json:
            dump(array)
        else:
            arrays.print_array(out, array)
        return
    with api_call(), client() as api:
        detail = api.job(job)
    if as_json:
        dump(detail)
    else:
        render.print_status(out, detail)


def why(job: Annotated[str, typer.Argument(help="The job id, or its name.")], as_json: JsonOption = False) -> None:
    """Why a pending job waits, in numbers: what blocks it, its budget's standing, estimated start, what would help;
    for a running job: its slice end, whether it may be preempted now, and by what and with what notice."""
    with api_call(), client() as api:
        reason = api.why(job)
    if as_json:
        dump(reason)
    else:
        out.print(render.why_panel(reason))


def logs(
    job: Annotated[str, typer.Argument(help="The job id.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the attempt ends.")] = False,
    attempt: Annotated[int | None, typer.Option("--attempt", help="Which attempt (default: the latest).")] = None,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Start at this byte.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the chunks as JSON lines.")] = False,
    replica: Annotated[
        int | None,
        typer.Option("--replica", min=0, help="Only this replica's output (default: every replica, lines labelled)."),
    ] = None,
) -> None:
    """Print a job's output; with -f, follow it until the attempt ends (Ctrl-C stops following). A gang's lines are
    labelled with their replica (`0: `, `1: `…); --replica N prints only replica N's output, unlabelled."""
    with api_call(), client() as api:
        try:
            for chunk in api.follow_logs(job, offset=offset, attempt=attempt, follow=follow, replica=replica):
                if as_json:
                    typer.echo(chunk.model_dump_json())  # one JSON object per line
                else:
                    sys.stdout.write(chunk.data)
                    sys.stdout.flush()
        except KeyboardInterrupt:
            raise typer.Exit(code=0) from None


def register(app: typer.Typer) -> None:
    from allotment.cli.history import history

    app.command("submit")(submit)
    app.command("run", context_settings={"allow_interspersed_args": False})(run)
    app.command("session")(session)
    app.command("queue")(queue)
    app.command("status")(status)
    app.command("why")(why)
    app.command("logs")(logs)
    app.command("history")(history)
