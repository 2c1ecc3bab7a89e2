"""What the CLI shows: configuration summaries, configuration problems and one cycle's decisions.

Owns: turning a validated configuration or a (snapshot, decisions) pair into plain JSON-ready data, and rendering
that same data as Rich tables, so `--json` and the tables always say the same thing.

Must not: load files, build workloads or decide anything.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table

from allotment.config import AllotmentConfig, ConfigError, to_core
from allotment.core.decisions import Decisions
from allotment.core.model import Allocation, NodeState, Seconds, Snapshot

HOURS_PER_MONTH = 720


def iso(t: Seconds) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def relative(delta: Seconds) -> str:
    """+45m, +3h20m, +2d4h, -5m, now."""
    if delta == 0:
        return "now"
    sign, d = ("+" if delta > 0 else "-"), abs(delta)
    days, rest = divmod(d, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{sign}{days}d{hours}h" if hours else f"{sign}{days}d"
    if hours:
        return f"{sign}{hours}h{minutes}m" if minutes else f"{sign}{hours}h"
    if minutes:
        return f"{sign}{minutes}m"
    return f"{sign}{seconds}s"


def when(t: Seconds | None, now: Seconds) -> str:
    if t is None:
        return "—"
    return f"{datetime.fromtimestamp(t, UTC):%m-%d %H:%M} ({relative(t - now)})"


# Configuration ------------------------------------------------------------------------------------------------


def config_summary(cfg: AllotmentConfig) -> dict[str, Any]:
    core = to_core(cfg)
    clusters = []
    for cluster in cfg.fleet.clusters:
        nodes = [n for n in core.nodes if n.cluster == cluster.name]
        by_type = Counter[str]()
        for n in nodes:
            by_type[n.gpu_type] += n.gpus
        clusters.append(
            {
                "name": cluster.name,
                "nodes": len(nodes),
                "gpus": sum(by_type.values()),
                "gpus_by_type": dict(sorted(by_type.items())),
                "topology": list(cluster.topology),
                "not_ready": {n.name: n.state.value for n in nodes if n.state is not NodeState.READY},
            }
        )
    per_hour = sum(Decimal(g) * cfg.credits[t] for t, g in cfg.gpus_by_type().items())
    roles = Counter(m.role.value for b in cfg.budgets for m in b.members)
    return {
        "clusters": clusters,
        "gpus": sum(c["gpus"] for c in clusters),
        "gpus_by_type": dict(sorted(cfg.gpus_by_type().items())),
        "rates": {t: str(r) for t, r in cfg.credits.items()},
        "credits_per_hour": str(per_hour),
        "credits_per_30_days": str(per_hour * HOURS_PER_MONTH),
        "budgets": {
            "count": len(cfg.budgets),
            "levels": cfg.depth(),
            "leaves": len(cfg.leaves()),
            "roots": [b.name for b in cfg.roots()],
            "allocated": str(sum(b.allocation for b in cfg.roots())),
            "with_max_gpus": sum(1 for b in cfg.budgets if b.max_gpus is not None),
        },
        "users": {"count": len(cfg.users), "roles": dict(sorted(roles.items()))},
        "period": {"length": cfg.period.length.value, "starts": cfg.period.starts.isoformat()},
        "windows": [
            {
                "id": w.id,
                "budget": w.budget,
                "pool": f"{w.cluster}/{w.gpu_type}",
                "gpus": w.gpus,
                "start": iso(w.start),
                "end": iso(w.end),
            }
            for w in cfg.windows
        ],
    }


def print_config_summary(console: Console, path: str, data: dict[str, Any]) -> None:
    console.print(f"[green]✓[/green] {path} is valid")
    table = Table(title="Clusters", title_justify="left")
    for column in ("cluster", "nodes", "GPUs", "by type", "topology", "not ready"):
        table.add_column(column, justify="right" if column in ("nodes", "GPUs") else "left")
    for c in data["clusters"]:
        by_type = ", ".join(f"{t} {g:,}" for t, g in c["gpus_by_type"].items())
        not_ready = ", ".join(f"{n} ({s})" for n, s in c["not_ready"].items()) or "—"
        table.add_row(
            c["name"], f"{c['nodes']:,}", f"{c['gpus']:,}", by_type, " < ".join(c["topology"]) or "—", not_ready
        )
    console.print(table)
    types = ", ".join(f"{t} {g:,} (×{data['rates'][t]})" for t, g in data["gpus_by_type"].items())
    b, u = data["budgets"], data["users"]
    console.print(f"GPUs: {data['gpus']:,} — {types}")
    console.print(
        f"Capacity: {Decimal(data['credits_per_hour']):,.1f} credits/hour, "
        f"{Decimal(data['credits_per_30_days']):,.0f} per 30 days; "
        f"allocated per {data['period']['length']}: {Decimal(b['allocated']):,}"
    )
    console.print(
        f"Budgets: {b['count']} in {b['levels']} levels ({b['leaves']} leaves, roots: {', '.join(b['roots'])}), "
        f"{b['with_max_gpus']} with a GPU limit"
    )
    roles = ", ".join(f"{n} {r}" for r, n in u["roles"].items())
    console.print(f"Users: {u['count']} ({roles or 'no roles'})")
    for w in data["windows"]:
        console.print(
            f"Window {w['id']}: {w['budget']} holds {w['gpus']} GPUs of {w['pool']} {w['start']} → {w['end']}"
        )


def print_problems(console: Console, error: ConfigError) -> None:
    count = len(error.problems)
    console.print(f"[red]✗[/red] {count} problem{'s' if count != 1 else ''} in the configuration", highlight=False)
    for p in error.problems:
        console.print(str(p), markup=False, highlight=False, soft_wrap=True)


# Decisions ----------------------------------------------------------------------------------------------------


def placement_summary(placement: tuple[Allocation, ...], cluster_of: dict[str, str]) -> str:
    if not placement:
        return "—"
    if len(placement) == 1:
        a = placement[0]
        return f"{a.node} ×{len(a.gpus)}"
    first, last = placement[0].node, placement[-1].node
    gpus = sum(len(a.gpus) for a in placement)
    return f"{cluster_of.get(first, '?')}: {len(placement)} nodes, {gpus} GPUs ({first} … {last})"


def decisions_data(snapshot: Snapshot, decisions: Decisions, now: Seconds, shown: int) -> dict[str, Any]:
    """Everything the demo shows, as JSON-ready data."""
    jobs = {j.id: j for j in snapshot.jobs}
    cluster_of = {n.name: n.cluster for n in snapshot.nodes}
    usable = sum(n.gpus for n in snapshot.nodes if n.state is not NodeState.DOWN)
    busy = sum(j.run.gpu_count for j in snapshot.jobs if j.run is not None)
    starting = sum(sum(len(a.gpus) for a in s.placement) for s in decisions.starts)
    leaving = 0
    for p in decisions.preempts:
        run = jobs[p.job_id].run
        leaving += run.gpu_count if run is not None else 0
    starts = [
        {
            "job": s.job_id,
            "budget": jobs[s.job_id].budget,
            "user": jobs[s.job_id].user,
            "gpus": sum(len(a.gpus) for a in s.placement),
            "placement": placement_summary(s.placement, cluster_of),
            "nodes": [a.node for a in s.placement],
            "run_class": s.run_class.value,
            "slice_end": s.slice_end,
            "rule": s.rule,
        }
        for s in decisions.starts
    ]
    preemptions = [
        {
            "job": p.job_id,
            "budget": jobs[p.job_id].budget,
            "gpus": jobs[p.job_id].total_gpus,
            "reason": p.reason.value,
            "grace": p.grace,
            "requeue": p.requeue,
            "refund": p.refund,
            "preemptor": p.preemptor,
        }
        for p in decisions.preempts
    ]
    renewals = [{"job": r.job_id, "budget": jobs[r.job_id].budget, "slice_end": r.slice_end} for r in decisions.renews]
    lapses = [{"job": lp.job_id, "budget": jobs[lp.job_id].budget, "why": lp.why} for lp in decisions.lapses]
    reservations = [
        {
            "job": r.job_id,
            "budget": jobs[r.job_id].budget,
            "gpus": sum(g for _, g in r.nodes),
            "nodes": len(r.nodes),
            "cluster": cluster_of.get(r.nodes[0][0], "?") if r.nodes else None,
            "planned_start": r.planned_start,
            "kind": r.kind.value,
        }
        for r in decisions.reserves
    ]
    waiting = [j for j in snapshot.jobs if j.id in decisions.pending]
    pending = []
    for job in waiting[:shown]:
        w = decisions.pending[job.id]
        pending.append(
            {
                "job": job.id,
                "budget": job.budget,
                "gpus": job.total_gpus,
                "kind": job.kind.value,
                "contract": job.contract.value,
                "blocker": w.blocker.value,
                "message": w.message,
                "needed_gpus": w.needed_gpus,
                "free_gpus": w.free_gpus,
                "estimated_start": w.estimated_start,
                "hints": [{"kind": h.kind.value, "detail": h.detail, "start": h.start} for h in w.hints],
            }
        )
    blockers = Counter(w.blocker.value for w in decisions.pending.values())
    return {
        "now": now,
        "now_iso": iso(now),
        "summary": {
            "gpus": sum(n.gpus for n in snapshot.nodes),
            "gpus_usable": usable,
            "gpus_busy": busy,
            "gpus_free": usable - busy,
            "gpus_starting": starting,
            "gpus_leaving": leaving,
            "jobs_running": sum(1 for j in snapshot.jobs if j.run is not None),
            "jobs_pending": len(waiting) + len(decisions.starts),
            "starts": len(starts),
            "preemptions": len(preemptions),
            "renewals": len(renewals),
            "lapses": len(lapses),
            "reservations": len(reservations),
            "still_pending": len(waiting),
            "blockers": dict(blockers.most_common()),
        },
        "starts": starts,
        "preemptions": preemptions,
        "renewals": renewals,
        "lapses": lapses,
        "reservations": reservations,
        "pending": pending,
        "drain_estimates": dict(decisions.drain_estimates),
    }


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="right" if column in ("GPUs", "grace", "free") else "left")
    return table


def print_decisions(console: Console, data: dict[str, Any], limit: int) -> None:
    """Tables of the cycle's decisions; long lists are cut at `limit` rows (the JSON has them all)."""
    now = int(data["now"])
    s = data["summary"]

    def more(rows: list[Any]) -> None:
        if len(rows) > limit:
            console.print(f"  … and {len(rows) - limit} more")

    console.print(f"[bold]One scheduling cycle at {data['now_iso']}[/bold]")
    t = _table(f"Starts ({s['starts']})", "job", "budget", "GPUs", "placement", "slice end", "rule")
    for r in data["starts"][:limit]:
        t.add_row(
            r["job"],
            r["budget"],
            str(r["gpus"]),
            r["placement"],
            when(r["slice_end"], now),
            f"{r['rule']} ({r['run_class']})",
        )
    console.print(t)
    more(data["starts"])
    t = _table(f"Preemptions ({s['preemptions']})", "job", "budget", "GPUs", "reason", "grace", "for", "after")
    for r in data["preemptions"][:limit]:
        after = "refund" if r["refund"] else ("requeue" if r["requeue"] else "finished")
        t.add_row(r["job"], r["budget"], str(r["gpus"]), r["reason"], f"{r['grace']}s", r["preemptor"] or "—", after)
    console.print(t)
    more(data["preemptions"])
    t = _table(f"Renewals ({s['renewals']}) and lapses ({s['lapses']})", "job", "budget", "outcome")
    for r in data["renewals"][:limit]:
        t.add_row(r["job"], r["budget"], f"renewed to {when(r['slice_end'], now)}")
    for r in data["lapses"][:limit]:
        t.add_row(r["job"], r["budget"], f"lapsed: {r['why']}")
    console.print(t)
    t = _table(f"Reservations ({s['reservations']})", "job", "budget", "GPUs", "where", "planned start", "kind")
    for r in data["reservations"][:limit]:
        t.add_row(
            r["job"],
            r["budget"],
            str(r["gpus"]),
            f"{r['cluster']}: {r['nodes']} nodes",
            when(r["planned_start"], now),
            r["kind"],
        )
    console.print(t)
    more(data["reservations"])
    t = _table(
        f"Pending: first {len(data['pending'])} of {s['still_pending']}",
        "job",
        "budget",
        "GPUs",
        "blocker",
        "why",
        "est. start",
        "hints",
    )
    for r in data["pending"]:
        hints = "; ".join(f"{h['detail']} → {when(h['start'], now)}" for h in r["hints"]) or "—"
        t.add_row(
            r["job"], r["budget"], str(r["gpus"]), r["blocker"], r["message"], when(r["estimated_start"], now), hints
        )
    console.print(t)
    for node, empty_at in data["drain_estimates"].items():
        console.print(f"Draining {node}: empty by {when(empty_at, now)}")
    blockers = ", ".join(f"{k} {v}" for k, v in s["blockers"].items())
    console.print(
        f"[bold]Summary[/bold]: {s['gpus_busy']:,} of {s['gpus_usable']:,} usable GPUs busy, {s['gpus_free']:,} free; "
        f"{s['starts']} starts ({s['gpus_starting']:,} GPUs), {s['preemptions']} preemptions "
        f"({s['gpus_leaving']:,} GPUs), {s['renewals']} renewals, {s['lapses']} lapses, "
        f"{s['reservations']} reservations; {s['still_pending']:,} still pending ({blockers})"
    )
