"""How the CLI shows job arrays: a submitted array, an array's task states (`allot status ARRAY`), what cancel,
hold and release did to one, and pending tasks of one array collapsed into one queue line as squeue shows them
(`a-1f2e_[8-999%50]`).

Owns: those renderings, and telling an array's id from a job's (config.arrays: `a-<hex>` against `a-<hex>_<i>`).
Must not: talk HTTP (the SDK does) or decide anything about arrays (the server does).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from allotment.config.arrays import bracketed, is_array_id
from allotment.sdk import models as m

__all__ = ["collapse", "is_array_id", "print_array", "print_control", "submitted_line"]


def submitted_line(result: m.Submitted) -> str:
    """The line that names a submitted array and its tasks."""
    a = result.array
    assert a is not None
    limit = f", at most {a.limit} at once" if a.limit is not None else ""
    return f"  array [bold]{a.id}[/bold]: {a.tasks} tasks {escape(a.id)}_[{escape(a.expression)}]{limit}"


def print_array(console: Console, a: m.ArrayView) -> None:
    """An array and its tasks per state, with their indices."""
    limit = f", at most {a.limit} at once" if a.limit is not None else ""
    console.print(f"[bold]{a.id}[/bold] {escape(a.name)}: {a.tasks} tasks [{escape(a.expression)}]{limit}, "
                  f"{escape(a.user)} in {escape(a.budget)}")  # fmt: skip
    table = Table(title_justify="left")
    for header in ("state", "tasks", "indices"):
        table.add_column(header, no_wrap=header != "indices", justify="right" if header == "tasks" else "left")
    for state, count in a.counts.items():
        table.add_row(state, str(count), escape(a.indices.get(state, "")))
    console.print(table)
    console.print(f"  [dim]one task: allot status {a.id}_<index> · allot why {a.id}_<index>[/dim]")


def print_control(console: Console, c: m.ArrayControl) -> None:
    done = {"cancel": "cancel requested for", "hold": "held", "release": "released"}[c.action]
    console.print(f"[green]✓[/green] {c.array.id}: {done} {c.changed} tasks "
                  f"({', '.join(f'{n} {s}' for s, n in c.array.counts.items())})")  # fmt: skip


def collapse(pending: Sequence[m.QueuedJob]) -> list[m.QueuedJob]:
    """Pending jobs with each run of one array's tasks that wait alike (blocker, message, estimated start) shown as
    one line whose id names them all, as squeue shows `123_[8-999%50]`; other jobs as they are."""
    out: list[m.QueuedJob] = []
    group: list[m.QueuedJob] = []

    def flush() -> None:
        if len(group) > 1 and group[0].array_id is not None:
            indices = [j.array_index for j in group if j.array_index is not None]
            out.append(group[0].model_copy(update={"id": bracketed(group[0].array_id, indices)}))
        else:
            out.extend(group)
        group.clear()

    for job in pending:
        if group and not _alike(group[0], job):
            flush()
        group.append(job)
    flush()
    return out


def _alike(a: m.QueuedJob, b: m.QueuedJob) -> bool:
    return a.array_id is not None and (a.array_id, a.blocker, a.message, a.estimated_start, a.hold) == (
        b.array_id,
        b.blocker,
        b.message,
        b.estimated_start,
        b.hold,
    )
