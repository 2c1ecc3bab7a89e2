"""`allot history`: finished jobs over a time range, as `sacct` shows them (a table, --json or --csv).

Owns: the command's options, reading --since/--until (an ISO 8601 date or time, local unless it names a zone, or a
duration ago such as 6h or 7d), defaulting to the caller's own jobs as sacct does, fetching every page, and the
table and CSV columns.

Must not: talk HTTP itself (the SDK does) or compute totals (the server does, from runs and the ledger).
"""

from __future__ import annotations

import csv
import re
import sys
import time
from datetime import datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from allotment.cli import render
from allotment.cli.common import JsonOption, api_call, client, dump, fail, out
from allotment.sdk import MICRO
from allotment.sdk import models as m

AGO = re.compile(r"^(\d+)([smhdw])$")
UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
CSV_COLUMNS = ["id", "name", "user", "budget", "state", "submitted", "started", "ended", "elapsed_s", "attempts",
               "gpus", "gpu_hours", "credits", "exit_code"]  # fmt: skip


def moment(value: str, option: str, now: float | None = None) -> int:
    """Unix seconds from an ISO 8601 date or datetime (local time unless it names a zone) or a duration ago."""
    text = value.strip()
    ago = AGO.match(text)
    if ago:
        return int((time.time() if now is None else now) - int(ago[1]) * UNIT[ago[2]])
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    except ValueError:
        fail(f"{option} {value!r}: give an ISO 8601 date or time (2026-12-01, 2026-12-01T08:00) or a time ago (7d)")


def _iso(t: int | None) -> str:
    return "" if t is None else datetime.fromtimestamp(t).isoformat(timespec="seconds")


def history(
    since: Annotated[
        str | None, typer.Option("--since", "-S", help="From: ISO 8601 date/time or a duration ago, e.g. 7d (1d).")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", "-E", help="To (exclusive); default now.")] = None,
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user's jobs.")] = None,
    budget: Annotated[str | None, typer.Option("--budget", "-b", help="Only this budget's jobs.")] = None,
    state: Annotated[
        list[str] | None, typer.Option("--state", "-s", help="completed, failed, cancelled or lost (repeat).")
    ] = None,
    all_users: Annotated[
        bool, typer.Option("--all-users", "-a", help="Every job you may see, not only yours (sacct -a).")
    ] = False,
    as_json: JsonOption = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV (one header row) instead of a table.")] = False,
) -> None:
    """Finished jobs that ended in a time range (default: the last day), newest first, as `sacct` shows them: elapsed
    time, GPU-hours, credits charged and exit code. Your own jobs unless --user, --budget or --all-users."""
    if as_json and as_csv:
        fail("give --json or --csv, not both")
    now = time.time()
    start = None if since is None else moment(since, "--since", now)
    end = None if until is None else moment(until, "--until", now)
    with api_call(), client() as api:
        if user is None and budget is None and not all_users:
            user = api.me().user
        first = api.history(since=start, until=end, user=user, budget=budget, state=state, limit=500)
        items, cursor = list(first.items), first.next_cursor
        while cursor is not None:  # the range is fixed by the first page's answer
            more = api.history(since=first.since, until=first.until, user=user, budget=budget, state=state,
                               limit=500, cursor=cursor)  # fmt: skip
            items, cursor = items + more.items, more.next_cursor
    page = m.HistoryPage(since=first.since, until=first.until, items=items, next_cursor=None)
    if as_json:
        dump(page)
    elif as_csv:
        _csv(items)
    elif not items:
        out.print(f"[dim]no finished jobs between {render.clock(page.since)} and {render.clock(page.until)}[/dim]")
    else:
        out.print(_table(page))


def _csv(items: list[m.HistoryEntry]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for h in items:
        writer.writerow([h.id, h.name, h.user, h.budget, h.state, _iso(h.submitted_at), _iso(h.started_at),
                         _iso(h.ended_at), h.elapsed, h.attempts, h.gpus * h.replicas, f"{h.gpu_hours:.4f}",
                         f"{h.charged_micro / MICRO:.6f}", "" if h.exit_code is None else h.exit_code])  # fmt: skip


def _table(page: m.HistoryPage) -> Table:
    gpu_hours = sum(h.gpu_hours for h in page.items)
    spent = sum(h.charged_micro for h in page.items)
    title = (f"History {render.clock(page.since)} → {render.clock(page.until)}: {len(page.items)} jobs, "
             f"{gpu_hours:,.2f} GPU-hours, {render.credits(spent)} credits")  # fmt: skip
    table = Table(title=title, title_justify="left")
    for column in ("id", "name", "user", "budget", "state", "started", "ended", "elapsed", "GPUs", "GPU-h",
                   "credits", "exit"):  # fmt: skip
        table.add_column(
            column, justify="right" if column in ("elapsed", "GPUs", "GPU-h", "credits", "exit") else "left"
        )
    for h in page.items:
        table.add_row(
            h.id,
            escape(h.name),
            h.user,
            h.budget,
            render.state(h.state),
            render.clock(h.started_at),
            render.clock(h.ended_at),
            render.ago(h.elapsed),
            str(h.gpus * h.replicas),
            f"{h.gpu_hours:,.2f}",
            render.credits(h.charged_micro, 4),
            "—" if h.exit_code is None else str(h.exit_code),
        )
    return table
