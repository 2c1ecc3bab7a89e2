"""Booked-but-unused capacity-window GPU-hours per budget and window, read for the views (`allot budget show`,
`allot usage`, the usage report, the dashboard's budget page): the squatting signal docs/policy.md §7 promises.

Owns: loading a window's runs on its pool (the window budget's runs holding GPUs of nodes of the pool's cluster and
GPU type during the window) and applying ledger.windowuse to them.

Must not: hold the arithmetic (ledger/windowuse.py does) or write anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.core.model import Seconds
from allotment.ledger.windowuse import Holding, window_use
from allotment.service.views import WindowView
from allotment.store.tables import JobRow, NodeRow, RunRow, WindowRow


def window_views(session: Session, windows: Iterable[WindowRow], now: Seconds) -> list[WindowView]:
    """Each window with what it booked, what its budget used and what stayed unused, up to now."""
    rows = list(windows)
    if not rows:
        return []
    pools = {(n.name): (n.cluster, n.gpu_type) for n in session.scalars(select(NodeRow))}
    lo, hi = min(w.start for w in rows), max(w.end for w in rows)
    runs = session.execute(
        select(RunRow.started_at, RunRow.ended_at, RunRow.placement, JobRow.budget)
        .join(JobRow, JobRow.id == RunRow.job_id)
        .where(
            JobRow.budget.in_(sorted({w.budget for w in rows})),
            RunRow.started_at < hi,
            (RunRow.ended_at.is_(None)) | (RunRow.ended_at > lo),
        )
    ).all()
    out = []
    for w in rows:
        held = []
        for started, ended, placement, budget in runs:
            if budget != w.budget:
                continue
            gpus = sum(len(a["gpus"]) for a in placement if pools.get(str(a["node"])) == (w.cluster, w.gpu_type))
            if gpus:
                held.append(Holding(started, ended if ended is not None else now, gpus))
        use = window_use(w.start, w.end, w.gpus, held, now)
        out.append(
            WindowView(
                id=w.id,
                budget=w.budget,
                cluster=w.cluster,
                gpu_type=w.gpu_type,
                gpus=w.gpus,
                start=w.start,
                end=w.end,
                booked_gpu_seconds=use.booked,
                used_gpu_seconds=use.used,
                unused_gpu_seconds=use.unused,
            )
        )
    return out
