"""What-if budgeting: replay a recorded history under a proposed budget plan for the next period.

Owns: reading the plan (the budget-plan YAML of `allot budget plan`, docs/api.md "Budget plans"), reading the
history — the jobs an Allotment database recorded (its jobs table and their runs) or a real trace — applying the plan
to the organisation's configuration, replaying the history from the plan's period start through the full
Allotment policy, and the per-budget report: expected share of the delivered GPU-time, waits and the date the
budget would run out.

Must not: change the database it reads (the history is read-only) or apply the plan (the service does).
"""

from __future__ import annotations

import html
import math
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from sqlalchemy import select

from allotment.config import ConfigError, load_config
from allotment.config.plans import BudgetPlan
from allotment.core.cycle import AllotmentPolicy
from allotment.core.jobstate import JobState
from allotment.core.model import ContractClass, JobKind
from allotment.sim import metrics, report
from allotment.sim.results import SimResult
from allotment.sim.runner import SimOptions, Simulation
from allotment.sim.traces import Sizing, fleet_gpus, organisation, read_itp, read_philly, to_jobs, window
from allotment.sim.workload import SimJob, Workload
from allotment.store.db import make_engine, session_factory
from allotment.store.tables import JobRow, RunRow

DAY = 86400


class WhatIfError(ValueError):
    """A plan or history that cannot be replayed; the message says why."""


def load_plan(path: Path) -> BudgetPlan:
    try:
        plan = BudgetPlan.model_validate(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise WhatIfError(f"{path}: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise WhatIfError(f"{path}: {problems}") from None
    if not plan.budgets:
        raise WhatIfError(f"{path}: budgets: the plan lists no budget")
    return plan


def period_start(plan: BudgetPlan) -> int:
    """00:00 UTC of the first day of the period the plan is for (the period's id is that date), in seconds."""
    first = date.fromisoformat(plan.period)
    return int(datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp())


def _iso(seconds: int) -> str:
    """A configuration timestamp (ISO 8601, UTC) from Unix seconds."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def apply_plan(data: dict[str, Any], plan: BudgetPlan) -> dict[str, Any]:
    """The configuration `data` with the plan's budgets (allocations, limits, members, new budgets) and windows,
    its period calendar starting at the plan's period."""
    out = dict(data)
    budgets = [dict(b) for b in data.get("budgets", [])]
    by_name = {b["name"]: b for b in budgets}
    for pb in plan.budgets:
        row = by_name.get(pb.name)
        if row is None:
            if pb.parent is None:
                raise WhatIfError(f"plan: the new budget {pb.name} must name its parent")
            row = {"name": pb.name, "parent": pb.parent}
            budgets.append(row)
            by_name[pb.name] = row
        row["allocation"] = str(pb.allocation)
        if pb.max_gpus is not None:
            row["max_gpus"] = pb.max_gpus
        if pb.members is not None:
            row["members"] = [{"user": m.user, "role": m.role.value} for m in pb.members]
    out["budgets"] = budgets
    if plan.windows is not None:
        listed = {b.name for b in plan.budgets}
        kept = [w for w in data.get("windows", []) if w.get("budget") not in listed]
        out["windows"] = kept + [{**w.model_dump(), "start": _iso(w.start), "end": _iso(w.end)} for w in plan.windows]
    out["period"] = {**dict(data.get("period", {})), "starts": plan.period}
    return out


def history_from_database(url: str, days: float) -> list[SimJob]:
    """The jobs submitted in the last `days` days of an Allotment database, re-timed to start at 0. A finished job's
    work is the time its runs held GPUs; an unfinished one asks for its slice."""
    try:
        sessions = session_factory(make_engine(url))
        with sessions() as session:
            latest = session.scalar(select(JobRow.submitted_at).order_by(JobRow.submitted_at.desc()).limit(1))
            if latest is None:
                raise WhatIfError(f"{url}: the database holds no jobs")
            since = latest - int(days * DAY)
            rows = list(
                session.scalars(select(JobRow).where(JobRow.submitted_at >= since).order_by(JobRow.submitted_at))
            )
            held: dict[str, int] = {}
            for job_id, start, end in session.execute(
                select(RunRow.job_id, RunRow.started_at, RunRow.ended_at).where(RunRow.ended_at.is_not(None))
            ):
                held[job_id] = held.get(job_id, 0) + int(end or start) - int(start)
    except WhatIfError:
        raise
    except Exception as exc:
        raise WhatIfError(f"{url}: cannot read the history ({exc})") from None
    t0 = rows[0].submitted_at
    return [
        SimJob(
            id=r.id,
            submit=r.submitted_at - t0,
            budget=r.budget,
            user=r.user,
            gpus=r.gpus,
            replicas=r.replicas,
            work=max(held.get(r.id, 0) if r.state in (JobState.COMPLETED, JobState.FAILED) else r.slice_seconds, 60),
            kind=JobKind(r.kind),
            contract=ContractClass(r.contract),
            slice_seconds=r.slice_seconds,
            priority=r.priority,
            grace=r.grace,
            fallback_opportunistic=r.fallback_opportunistic,
            cls=r.kind if r.kind == "session" else r.contract,
        )
        for r in rows
    ]


def _history(history: str, config: Path | None, days: float) -> tuple[list[SimJob], dict[str, Any]]:
    kind, _, rest = history.partition(":")
    if kind in ("itp", "philly") and rest:
        path = Path(rest)
        if not path.exists():
            raise WhatIfError(f"history: {path} does not exist")
        rows = (
            read_itp(p for p in path.iterdir() if p.name.startswith("cluster")) if kind == "itp" else read_philly(path)
        )
        rows = window(rows, days)
        return list(to_jobs(rows)), organisation(kind, rows, fleet_gpus(rows, Sizing.CONTENDED))
    if config is None:
        raise WhatIfError("a database history needs --config (the organisation's configuration file)")
    try:
        data = yaml.safe_load(config.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise WhatIfError(f"{config}: {exc}") from None
    return history_from_database(history, days), data


def what_if(plan: BudgetPlan, jobs: list[SimJob], data: dict[str, Any], out: Path, seed: int = 1) -> SimResult:
    out.mkdir(parents=True, exist_ok=True)
    config = out / "whatif-organisation.yaml"
    config.write_text(yaml.safe_dump(apply_plan(data, plan), sort_keys=False))
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise WhatIfError(f"the plan does not fit the organisation: {exc}") from None
    leaves = {b.name for b in cfg.leaves()}
    kept = [j for j in jobs if j.budget in leaves]
    if not kept:
        raise WhatIfError("no job of the history belongs to a budget of the planned organisation")
    span = max(j.submit for j in kept)
    start = period_start(plan)
    notes = (f"what-if: {len(kept)} jobs of the history ({len(jobs) - len(kept)} of unknown budgets left out)",)
    workload = Workload("what-if", config, tuple(kept), span + DAY, notes)
    return Simulation(workload, AllotmentPolicy(), SimOptions(seed=seed, start=start), label="allotment").run()


def budget_rows(result: SimResult, start: int) -> list[list[str]]:
    """Per leaf budget: allocation, expected share of delivered GPU-time (and of allocations), waits, exhaustion."""
    total_alloc = sum(result.allocations.values()) or 1
    got: dict[str, float] = {}
    budget_of = {j.id: j.budget for j in result.jobs}
    for r in result.runs:
        got[budget_of[r.job_id]] = got.get(budget_of[r.job_id], 0.0) + r.gpus * (
            (r.end if r.end is not None else result.duration) - r.start
        )
    delivered = sum(got.values()) or 1.0
    rows = [
        [
            "budget",
            "allocation (credits)",
            "allocated share",
            "expected share",
            "wait h (p50 / p95)",
            "jobs finished / submitted",
            "runs out on",
        ]
    ]
    for b in sorted(result.allocations):
        waits = metrics.Quantiles.of(
            ((j.first_start if j.first_start is not None else result.duration) - j.submit) / 3600
            for j in result.jobs
            if j.budget == b
        )
        js = [j for j in result.jobs if j.budget == b]
        ex = result.exhausted.get(b)
        when = "–" if ex is None else datetime.fromtimestamp(start + ex, UTC).strftime("%Y-%m-%d %H:%M")
        rows.append(
            [
                b,
                f"{result.allocations[b] / 1e6:,.0f}",
                f"{100 * result.allocations[b] / total_alloc:.1f} %",
                f"{100 * got.get(b, 0.0) / delivered:.1f} %",
                "–" if waits.n == 0 or math.isnan(waits.p50) else f"{waits.p50:.2f} / {waits.p95:.2f}",
                f"{sum(1 for j in js if j.end is not None)} / {len(js)}",
                when,
            ]
        )
    return rows


def run_what_if(
    plan_path: Path, history: str, out: Path, *, config: Path | None, days: float, seed: int = 1
) -> tuple[Path, Path]:
    """Replay `history` under the plan at `plan_path`; write report.md and report.html into `out`."""
    plan = load_plan(plan_path)
    jobs, data = _history(history, config, days)
    result = what_if(plan, jobs, data, out, seed)
    start = period_start(plan)
    rows = budget_rows(result, start)
    title = f"What-if: plan for {plan.period}" + (f" ({plan.why})" if plan.why else "")
    notes = [*result.notes, f"history: {history}, last {days:g} days, replayed from {plan.period}"]
    md = [f"# {title}", "", *[f"- {n}" for n in notes], "", report.markdown_table(rows), ""]
    md += [
        "Expected share: the budget's part of all GPU-time delivered in the replay. Runs out on: when its balance",
        "first reaches zero (guaranteed work then stops; opportunistic work may go on).",
        "",
    ]
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text("\n".join(md))
    body = f"<h1>{html.escape(title)}</h1><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"
    html_path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
        f"{body}{report.html_table(rows)}</body></html>"
    )
    return md_path, html_path
