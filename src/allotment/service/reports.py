"""Reports: usage by budget, period and GPU type, from the ledger and the runs.

Owns: summing, per (budget, period, GPU type), the GPU-seconds runs held inside the period and the credits charged
and refunded for them; and listing the shown budgets' capacity windows overlapping the periods with their booked,
used and unused GPU-seconds (service.windowuse). Administrators and operators see every budget; others see the
budgets they belong to and the subtrees they lead.

Must not: write anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from allotment.ledger import EntryKind
from allotment.ledger.tree import ancestors
from allotment.service.context import Context
from allotment.service.errors import Forbidden, NotFound
from allotment.service.principal import Principal, budget_parents
from allotment.service.views import UsageReport, UsageRow
from allotment.service.windowuse import window_views
from allotment.store.db import reading
from allotment.store.tables import JobRow, LedgerEntryRow, NodeRow, PeriodRow, RunRow, WindowRow

NO_GPU_TYPE = "-"


def usage(ctx: Context, principal: Principal, *, periods: Sequence[str] = (), budget: str | None = None) -> UsageReport:
    """Usage in the given periods (default: the current one), for `budget`'s subtree or every visible budget."""
    now = ctx.now()
    with reading(ctx.sessions) as session:
        parents = budget_parents(session)
        if budget is not None:
            if budget not in parents:
                raise NotFound(f"no budget {budget!r}")
            if not principal.may_view_budget_jobs(budget, parents):
                raise Forbidden(f"{principal.user} may not see the usage of {budget!r}")
        wanted = list(periods) or [ctx.period(now).id]
        bounds = {r.id: (r.start, r.end) for r in session.scalars(select(PeriodRow).where(PeriodRow.id.in_(wanted)))}
        current = ctx.period(now)
        if current.id in wanted:
            bounds.setdefault(current.id, (current.start, current.end))
        unknown = sorted(set(wanted) - set(bounds))
        if unknown:
            raise NotFound(f"no period {unknown[0]!r}")

        def shown(name: str) -> bool:
            if budget is not None and name != budget and budget not in ancestors(name, parents):
                return False
            return principal.may_view_budget_jobs(name, parents)

        node_types = dict(session.execute(select(NodeRow.name, NodeRow.gpu_type)).all())
        run_types: dict[str, str] = {}
        rows: dict[tuple[str, str, str], dict[str, int]] = {}

        def row(key: tuple[str, str, str]) -> dict[str, int]:
            return rows.setdefault(key, {"gpu_seconds": 0, "charged": 0, "refunded": 0})

        lo, hi = min(b[0] for b in bounds.values()), max(b[1] for b in bounds.values())
        for run, owner in session.execute(
            select(RunRow, JobRow.budget)
            .join(JobRow, JobRow.id == RunRow.job_id)
            .where(RunRow.started_at < hi, (RunRow.ended_at.is_(None)) | (RunRow.ended_at > lo))
        ).all():
            first = run.placement[0]["node"] if run.placement else None
            gpu_type = node_types.get(str(first), NO_GPU_TYPE) if first is not None else NO_GPU_TYPE
            run_types[run.id] = gpu_type
            if not shown(owner):
                continue
            gpus = sum(len(a["gpus"]) for a in run.placement)
            end = run.ended_at if run.ended_at is not None else now
            for pid, (start, stop) in bounds.items():
                held = min(end, stop) - max(run.started_at, start)
                if held > 0:
                    row((owner, pid, gpu_type))["gpu_seconds"] += held * gpus
        for entry in session.scalars(
            select(LedgerEntryRow).where(
                LedgerEntryRow.period_id.in_(sorted(bounds)),
                LedgerEntryRow.kind.in_([EntryKind.CHARGE.value, EntryKind.REFUND.value]),
            )
        ):
            if not shown(entry.budget):
                continue
            gpu_type = run_types.get(entry.run_id or "", NO_GPU_TYPE)
            if entry.run_id is not None and entry.run_id not in run_types:
                found = session.scalar(select(RunRow.placement).where(RunRow.id == entry.run_id))
                gpu_type = node_types.get(str(found[0]["node"]), NO_GPU_TYPE) if found else NO_GPU_TYPE
                run_types[entry.run_id] = gpu_type
            r = row((entry.budget, entry.period_id, gpu_type))
            if entry.kind == EntryKind.CHARGE.value:
                r["charged"] -= entry.amount_micro
            else:
                r["refunded"] += entry.amount_micro
        booked = session.scalars(
            select(WindowRow).where(WindowRow.start < hi, WindowRow.end > lo).order_by(WindowRow.start, WindowRow.id)
        )
        windows = window_views(session, [w for w in booked if shown(w.budget)], now)
    return UsageReport(
        periods=sorted(bounds),
        rows=[
            UsageRow(
                budget=b,
                period=p,
                gpu_type=t,
                gpu_seconds=v["gpu_seconds"],
                charged_micro=v["charged"],
                refunded_micro=v["refunded"],
                net_micro=v["charged"] - v["refunded"],
            )
            for (b, p, t), v in sorted(rows.items())
        ],
        windows=windows,
    )
