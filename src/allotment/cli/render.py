"""How client commands show API answers: times, credits, states and the Rich tables of jobs, budgets and nodes.

Owns: formatting (Unix seconds as local clock times with a relative offset, credit-microunits as credits, coloured
states) and one table or panel per kind of answer, all from SDK models.

Must not: call the API or decide exit codes (see `common`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import datetime

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from allotment.config.fields import memory_text
from allotment.core.jobstate import JobState
from allotment.sdk import MICRO
from allotment.sdk import models as m

STATE_STYLE = {
    JobState.PENDING: "yellow",
    JobState.RUNNING: "green",
    JobState.PREEMPTING: "magenta",
    JobState.COMPLETED: "blue",
    JobState.FAILED: "red",
    JobState.CANCELLED: "dim",
    JobState.LOST: "red",
    "ready": "green",
    "cordoned": "yellow",
    "draining": "magenta",
    "down": "red",
}


def ago(delta: float) -> str:
    """3s, 4m10s, 2h05m, 3d4h (no sign)."""
    d = int(abs(delta))
    if d < 60:
        return f"{d}s"
    if d < 3600:
        return f"{d // 60}m{d % 60:02d}s"
    if d < 86400:
        return f"{d // 3600}h{d % 3600 // 60:02d}m"
    return f"{d // 86400}d{d % 86400 // 3600}h"


def relative(t: float, now: float | None = None) -> str:
    delta = t - (time.time() if now is None else now)
    if abs(delta) < 1:
        return "now"
    return f"in {ago(delta)}" if delta > 0 else f"{ago(delta)} ago"


def clock(t: int | None, now: float | None = None) -> str:
    """Local time (with the date when not today) and how far away it is; — when unknown."""
    if t is None:
        return "—"
    moment = datetime.fromtimestamp(t)
    today = datetime.fromtimestamp(time.time() if now is None else now).date()
    shown = f"{moment:%H:%M:%S}" if moment.date() == today else f"{moment:%Y-%m-%d %H:%M}"
    return f"{shown} ({relative(t, now)})"


def estimate(t: int | None, now: float | None = None) -> str:
    """An estimated start, never shown in the past: a passed estimate says it is overdue, to be re-estimated by the
    scheduler's next cycle, rather than "3m08s ago"."""
    if t is None:
        return "—"
    if t > (time.time() if now is None else now):
        return clock(t, now)
    return "any moment (estimate overdue)"


def credits(micro: int, places: int = 2) -> str:
    return f"{micro / MICRO:,.{places}f}"


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLE.get(name, ""))


def bar(fraction: float, width: int = 10) -> Text:
    """A horizontal bar of the remaining fraction: green, yellow under 40 %, red under 15 %."""
    f = min(1.0, max(0.0, fraction))
    filled = round(f * width)
    style = "green" if f >= 0.4 else "yellow" if f >= 0.15 else "red"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


def gpus(job: m.JobSummary) -> str:
    return f"{job.replicas}×{job.gpus}" if job.replicas > 1 else str(job.gpus)


# -- jobs -------------------------------------------------------------------------------------------------------


UNIX_TIME = re.compile(r"\b1\d{9}\b")


def readable(reason: str) -> str:
    """A state reason with its Unix times as local clock times."""
    return UNIX_TIME.sub(lambda t: f"{datetime.fromtimestamp(int(t[0])):%H:%M:%S}", reason)


def queue_table(jobs: Sequence[m.JobSummary], title: str = "Jobs", width: int = 200) -> Table:
    """The queue; the reason column gets what `width` leaves after the other columns, cut with an ellipsis."""
    now = time.time()
    rows = [
        [
            j.id,
            j.name,
            j.user,
            j.budget,
            gpus(j),
            "session" if j.kind == "session" else j.contract,
            j.state,
            readable(j.state_reason),
            ago(now - j.submitted_at),
        ]
        for j in jobs
    ]
    headers = ["id", "name", "user", "budget", "GPUs", "contract", "state", "reason", "age"]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    room = max(12, width - (sum(widths) - widths[7]) - 3 * len(headers) - 1)
    table = Table(title=title, title_justify="left")
    for header in headers:
        table.add_column(header, no_wrap=True, justify="right" if header in ("GPUs", "age") else "left")
    for r in rows:
        reason = r[7] if len(r[7]) <= room else r[7][: room - 1] + "…"
        table.add_row(*(escape(c) for c in r[:6]), state(r[6]), escape(reason), r[8])
    return table


QUEUE_COLUMNS = {
    "id": "id",
    "name": "name",
    "user": "user",
    "budget": "budget",
    "gpus": "GPUs",
    "contract": "contract",
    "state": "state",
    "blocker": "blocker",
    "start": "est. start",
    "age": "age",
}
"""`allot queue --format` column keys and their headers (the default shows all but age)."""
DEFAULT_QUEUE_COLUMNS = ("id", "name", "user", "budget", "gpus", "contract", "state", "blocker", "start")


def active_table(
    running: Sequence[m.JobSummary],
    pending: Sequence[m.QueuedJob],
    title: str = "Queue",
    width: int = 200,
    columns: Sequence[str] = DEFAULT_QUEUE_COLUMNS,
) -> Table:
    """`squeue --start`: running jobs, then pending ones in scheduling order, each with what holds it (the blocker
    the engine wrote for a pending job) and its estimated start, in `columns` (QUEUE_COLUMNS keys); the blocker
    column gets what `width` leaves."""
    now = time.time()
    rows: list[dict[str, str]] = []
    for j in [*running, *pending]:
        row = {"id": j.id, "name": j.name, "user": j.user, "budget": j.budget, "gpus": gpus(j),
               "contract": _contract(j), "state": j.state, "age": ago(now - j.submitted_at)}  # fmt: skip
        if isinstance(j, m.QueuedJob):
            row["blocker"] = f"{j.blocker}: {j.message}" if j.blocker else j.message
            row["start"] = estimate(j.estimated_start, now)
        else:
            row["blocker"], row["start"] = readable(j.state_reason), "—"
        rows.append(row)
    widths = {c: max([len(QUEUE_COLUMNS[c])] + [len(r[c]) for r in rows]) for c in columns}
    room = max(12, width - sum(w for c, w in widths.items() if c != "blocker") - 3 * len(columns) - 1)
    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(QUEUE_COLUMNS[c], no_wrap=True, justify="right" if c in ("gpus", "age") else "left")
    for r in rows:
        cells: list[str | Text] = []
        for c in columns:
            if c == "state":
                cells.append(state(r[c]))
            elif c == "blocker":
                cells.append(escape(r[c] if len(r[c]) <= room else r[c][: room - 1] + "…"))
            else:
                cells.append(escape(r[c]))
        table.add_row(*cells)
    return table


def _contract(j: m.JobSummary) -> str:
    return "session" if j.kind == "session" else j.contract


def beside(job: m.JobDetail) -> str:
    """The CPUs and memory a replica asks for beside its GPUs, e.g. ", 16 CPUs and 64G per replica"; empty when none."""
    parts = ([f"{job.cpus} CPUs"] if job.cpus else []) + ([memory_text(job.memory_mib)] if job.memory_mib else [])
    return f", {' and '.join(parts)} per replica" if parts else ""


def job_panel(job: m.JobDetail) -> Panel:
    lines = [
        f"[bold]{escape(job.name)}[/bold] [dim]{job.id}[/dim]  {job.user} → {job.budget}",
        f"state      [{STATE_STYLE.get(job.state, '')}]{job.state}[/] — {escape(readable(job.state_reason))}",
        f"command    {escape(' '.join(job.command))}",
        f"resources  {gpus(job)} GPUs"
        + beside(job)
        + (f" of {', '.join(job.gpu_types)}" if job.gpu_types else "")
        + (f" on {', '.join(job.clusters)}" if job.clusters else ""),
        f"contract   {job.contract}, slice {ago(job.slice_seconds)}, grace {ago(job.grace)}, priority {job.priority}"
        + (", falls back to opportunistic" if job.fallback_opportunistic else ""),
        f"kind       {job.kind}; requeue {'yes' if job.requeue else 'no'}"
        + (f"; max runtime {ago(job.max_runtime)}" if job.max_runtime else ""),
        f"charged    {credits(job.charged_micro, 4)} credits",
    ]
    if job.workdir:
        lines.insert(3, f"workdir    {escape(job.workdir)}")
    if job.array_id is not None:
        lines.insert(2, f"array      task {job.array_index} of {job.array_id} (the array: allot status {job.array_id})")
    if job.dependency:
        lines.insert(2, f"depends on {escape(job.dependency)}")
    return Panel("\n".join(lines), title="Job", title_align="left")


def lapsed(run: m.Run) -> bool:
    """A guaranteed run whose slice ended without renewal: it runs on as opportunistic work."""
    return bool(run.began_as) and run.began_as != run.run_class


def run_class_text(run: m.Run) -> str:
    """The class a run began as, and what it holds now when its slice lapsed."""
    if lapsed(run):
        return f"{run.began_as}; {run.run_class} since {clock(run.class_since)}"
    return run.run_class


def slice_end_text(run: m.Run) -> str:
    """The run's one slice end, with how often it was renewed and whether it lapsed."""
    if run.slice_end is None:
        return "—"
    renewed = f", renewed {run.renewals}×" if run.renewals else ""
    return clock(run.slice_end) + renewed + (", not renewed" if lapsed(run) else "")


def history_table(job: m.JobDetail) -> Table:
    """The job's state changes, with each slice renewal and lapse of its runs in time order, so the history and the
    runs table tell one story about its slice ends."""
    table = Table(title="History", title_justify="left")
    for column in ("at", "state", "why"):
        table.add_column(column)
    rows: list[tuple[int, int, Text, str]] = []
    for i, e in enumerate(job.history):
        change = Text(f"{e.from_state} → " if e.from_state else "", style="dim") + state(e.to_state)
        rows.append((e.at, i, change, readable(e.reason)))
    for s in job.slices:
        if s.kind == "renew":
            rows.append((s.start, len(rows), Text("slice", style="dim"), f"slice renewed until {clock(s.end)}"))
    for r in job.runs:
        if lapsed(r):
            why = f"slice ended without renewal: runs on as {r.run_class} work, preemptible"
            rows.append((r.class_since, len(rows), Text("slice", style="dim"), why))
    for at, _, change, why in sorted(rows, key=lambda row: (row[0], row[1])):
        table.add_row(clock(at), change, escape(why))
    return table


def runs_table(job: m.JobDetail) -> Table:
    table = Table(title="Runs", title_justify="left")
    for column in ("attempt", "class", "nodes", "started", "slice ends", "ended", "exit", "why it ended"):
        table.add_column(column)
    for r in job.runs:
        table.add_row(
            str(r.attempt),
            run_class_text(r),
            ", ".join(r.nodes),
            clock(r.started_at),
            slice_end_text(r),
            clock(r.ended_at),
            "—" if r.exit_code is None else str(r.exit_code),
            escape(r.preempt_reason or r.end_reason or ""),
        )
    return table


def charge_formula(line: m.ChargeLine) -> str:
    """A charge line as GPUs × time × rate (× price, when not full) = credits; other entries by their kind."""
    amount = credits(-line.amount_micro if line.kind == "charge" else line.amount_micro, 4)
    if line.seconds is None or line.gpus is None or line.gpu_rate_micro is None or line.price is None:
        return f"{line.kind} {amount} credits" + (f" ({line.memo})" if line.memo and line.kind != "charge" else "")
    price = "" if line.price == 1000 else f" × {line.price / 10:g} %"
    return (
        f"{line.gpus} GPUs × {ago(line.seconds)} × {credits(line.gpu_rate_micro)} credits/GPU-h{price} = "
        f"{amount} credits"
    )


def charge_lines_table(lines: Sequence[m.ChargeLine], title: str, *, budget_column: bool = False) -> Table:
    """Charge lines: when, for which run, and GPUs × time × rate = credits (the raw memos are in --json)."""
    table = Table(title=title, title_justify="left")
    columns = ["from", "to", *(["budget"] if budget_column else []), "run", "charged", "credits"]
    for column in columns:
        table.add_column(column, justify="right" if column == "credits" else "left")
    for line in lines:
        row = [
            clock(line.start) if line.start is not None else "—",
            clock(line.end),
            *([line.budget] if budget_column else []),
            line.run_id or "—",
            escape(charge_formula(line)),
            credits(line.amount_micro, 4),
        ]
        table.add_row(*row)
    return table


def charges_table(job: m.JobDetail) -> Table:
    return charge_lines_table(job.charge_lines, f"Charges (net {credits(job.charged_micro, 4)} credits)")


def print_status(console: Console, job: m.JobDetail) -> None:
    console.print(job_panel(job))
    console.print(history_table(job))
    if job.runs:
        console.print(runs_table(job))
    if job.charge_lines:
        console.print(charges_table(job))


def why_panel(why: m.Why, name: str = "") -> Panel:
    """Why a pending job waits, or a running job's outlook; both with its budget's standing."""
    s = why.standing
    money = (
        f"budget {s.budget:<9} balance {credits(s.balance_micro)} of {credits(s.allocation_micro)} credits; "
        f"committed {credits(s.committed_micro)}; available {credits(s.available_micro)}"
    )
    label = escape(name or (f"{why.name} ({why.job_id})" if why.name else why.job_id))
    if why.run is not None or why.state != "pending":
        return Panel("\n".join([*outlook_lines(why), money]), title=f"{label} is {why.state}", title_align="left")
    lines = [
        f"[bold]{escape(why.message)}[/bold]",
        f"blocker          {why.blocker or '— (the scheduler has not looked at it yet)'}",
        f"GPUs             needs {why.needed_gpus}, {why.free_gpus} free where it may run",
        f"estimated start  {estimate(why.estimated_start)}",
        money,
    ]
    for r in why.rooms:
        lines.append(f"session room     {room_text(r)}")
    if why.hints:
        lines.append("would start sooner with:")
        lines += [
            f"  • {h.kind}: {escape(h.detail)}" + (f" (start {estimate(h.start)})" if h.start else "")
            for h in why.hints
        ]
    return Panel("\n".join(lines), title=f"Why {label} waits", title_align="left")


def outlook_lines(why: m.Why) -> list[str]:
    """A running job's protection in local time: its slice end, whether and when it may be preempted, its notice."""
    o = why.run
    if o is None:
        return [f"[bold]{escape(why.message)}[/bold]"]
    began = o.began_as or o.run_class
    kind = o.run_class if began == o.run_class else f"began {began}, {o.run_class} since {clock(o.class_since)}"
    lines = [f"run              attempt {o.attempt}, {kind}, started {clock(o.started_at)}"]
    if o.leaving_at is not None or why.state == "preempting":
        lines.insert(0, f"[bold]leaving[/bold]: {escape(why.message)}")
        lines.append(f"killed at        {clock(o.leaving_at)}")
        return lines
    if o.run_class == "session":
        lines.insert(0, "[bold]a session: holds its GPUs until its length ends[/bold] (reclaimed early only if idle)")
        lines.append(f"ends             {clock(o.slice_end)}")
        return lines
    if o.preemptible_from is not None:
        lines.insert(0, f"[bold]in its guaranteed slice until {clock(o.preemptible_from)}[/bold]; then renewed if its "
                        f"budget funds another slice, else it may be preempted with {ago(o.notice)} notice by work "
                        "with a better claim")  # fmt: skip
    else:
        lines.insert(0, f"[bold]preemptible now[/bold], with {ago(o.notice)} notice (SIGTERM, then SIGKILL)")
    if o.slice_end is not None:
        lines.append(f"slice end        {clock(o.slice_end)}")
    lines.append(f"may yield to     {', '.join(o.preemptible_by) or '—'}")
    return lines


def room_text(r: m.SessionRoom) -> str:
    """One cluster's session room and where its size came from."""
    whole = f", {r.whole} of them on one node" if r.whole else ""
    return (
        f"{r.cluster}: {r.gpus} GPUs kept for sessions{whole} (floor {r.floor}, recent demand {r.demand}, "
        f"largest recent session {r.shape}, ceiling {r.ceiling})"
    )


def session_panel(session: m.Session, attach_hint: str) -> Panel:
    job = session.job
    lines = [f"[bold]{escape(job.name)}[/bold] [dim]{job.id}[/dim]  {job.user} → {job.budget}, {gpus(job)} GPUs"]
    if session.ready:
        lines.append(f"[green]ready[/green] since {clock(session.started_at)}; ends {clock(session.ends_at)}")
        for a in session.attach:
            lines.append(f"node {a.node}, GPUs {','.join(str(g) for g in a.gpus)}")
            lines.append(f"  [dim]{escape(a.hint)}[/dim]")
            lines.append(f"  {escape(' '.join(a.command))}")
        lines.append(f"attach:  [bold]{escape(attach_hint)}[/bold]")
        lines.append(f"release: [bold]allot cancel {job.id}[/bold]")
    else:
        lines.append(f"{job.state}: {escape(job.state_reason)}")
    return Panel("\n".join(lines), title="Session", title_align="left")


# -- budgets and nodes ---------------------------------------------------------------------------------------------


def budget_table(tree: m.BudgetTree, title: str | None = None) -> Table:
    table = Table(title=title or f"Budgets, period {tree.period} (credits)", title_justify="left")
    for column in ("budget", "allocation", "used", "remaining", "", "max GPUs"):
        table.add_column(column, justify="left" if column in ("budget", "") else "right")
    for b in tree.budgets:
        share = b.remaining_micro / b.allocation_micro if b.allocation_micro > 0 else 0.0
        name = "  " * b.depth + (b.name if b.leaf else f"[bold]{b.name}[/bold]")
        table.add_row(
            name,
            credits(b.allocation_micro),
            credits(b.used_micro, 3),
            credits(b.remaining_micro, 3),
            bar(share),
            "—" if b.max_gpus is None else str(b.max_gpus),
        )
    return table


def forecast_text(f: m.Forecast, now: float | None = None) -> str:
    """The run-out forecast in words: exhausted, runs out at a time before the period end, or lasts the period."""
    if f.outcome == "exhausted":
        return "exhausted: nothing left this period"
    if f.outcome == "runs_out" and f.runs_out_at is not None:
        return f"runs out {clock(f.runs_out_at, now)}, before the period ends {clock(f.period_end, now)}"
    return f"lasts the period (ends {clock(f.period_end, now)}; {credits(f.left_at_end_micro, 3)} credits left then)"


def budget_detail(detail: m.BudgetDetail) -> Group:
    b, f = detail.budget, detail.forecast
    lines = [
        f"[bold]{b.name}[/bold] ({'leaf: pays for jobs' if b.leaf else 'group'}), parent {b.parent or '—'}, "
        f"period {detail.period}",
        f"allocation {credits(b.allocation_micro)}  used {credits(b.used_micro, 3)}  "
        f"remaining {credits(b.remaining_micro, 3)} credits" + (f"  max {b.max_gpus} GPUs" if b.max_gpus else ""),
        f"rate       {credits(f.spent_micro, 3)} credits over the last {f.window // 3600} h = "
        f"{credits(f.per_hour_micro, 3)}/hour",
        f"forecast   {forecast_text(f)}",
    ]
    if detail.children:
        lines.append(f"children   {', '.join(detail.children)}")
    parts: list[Panel | Table] = [Panel("\n".join(lines), title="Budget", title_align="left")]
    if detail.members:
        members = Table(title="Members", title_justify="left")
        members.add_column("user")
        members.add_column("role")
        for mem in detail.members:
            members.add_row(mem.user, mem.role)
        parts.append(members)
    if detail.windows:
        parts.append(windows_table(detail.windows))
    return Group(*parts)


def gpu_hours(seconds: int) -> str:
    return f"{seconds / 3600:,.2f}"


def windows_table(windows: Sequence[m.Window], title: str = "Capacity windows (GPU-hours so far)") -> Table:
    """Capacity windows with what each booked, what its budget used and what stayed unused (the squatting signal)."""
    table = Table(title=title, title_justify="left")
    for column in ("id", "budget", "pool", "GPUs", "from", "to", "booked", "used", "unused"):
        table.add_column(column, justify="right" if column in ("GPUs", "booked", "used", "unused") else "left")
    for w in windows:
        unused = Text(gpu_hours(w.unused_gpu_seconds), style="yellow" if w.unused_gpu_seconds > 0 else "")
        table.add_row(
            w.id,
            w.budget,
            f"{w.cluster}/{w.gpu_type}",
            str(w.gpus),
            clock(w.start),
            clock(w.end),
            gpu_hours(w.booked_gpu_seconds),
            gpu_hours(w.used_gpu_seconds),
            unused,
        )
    return table


def plan_table(changes: Sequence[m.PlanChange], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("kind", "target", "field", "old", "new"):
        table.add_column(column)
    for c in changes:
        table.add_row(c.kind, c.target, c.field, Text(repr(c.old), style="red"), Text(repr(c.new), style="green"))
    return table


def node_class(j: m.NodeJob) -> str:
    """A run's class on a node: what it began as, and that a guaranteed run is past its slice."""
    if j.began_as and j.began_as != j.run_class:
        return f"{j.began_as}, past its slice"
    return j.run_class


def node_table(nodes: Sequence[m.Node]) -> Table:
    table = Table(title="Nodes", title_justify="left")
    for column in ("node", "cluster", "type", "GPUs free", "state", "why", "jobs"):
        table.add_column(column)
    for n in nodes:
        jobs = ", ".join(f"{j.job_id} ({j.user}/{j.budget}, {j.gpus} {node_class(j)})" for j in n.jobs)
        table.add_row(
            n.name,
            n.cluster,
            n.gpu_type,
            f"{n.free_gpus}/{n.gpus}",
            state(n.state + (" (forced)" if n.forced else "")),
            escape(n.reason or ""),
            escape(jobs) or "—",
        )
    return table
