"""What-if budgeting: replay a recorded history under a proposed budget plan for the next period.

Owns: reading the plan (the budget-plan YAML of `allot budget plan`, docs/api.md "Budget plans"), reading the
history — the jobs an Allotment database recorded (its jobs table and their runs, through a read-only connection) or
a real trace — applying the plan to the organisation's configuration, and replaying the history twice from the plan's
period start through the full Allotment policy: under the current organisation and under the plan, over the
history's span (the horizon the shares are measured on). The report is whatif_report.py; checking the plan the way a
server would is service/plan_check.py (the CLI runs it first).

Must not: change the database it reads (it is opened read-only, its journal mode untouched) or apply the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from sqlalchemy import select

from allotment.config import ConfigError, load_config, to_core
from allotment.config.plans import BudgetPlan
from allotment.core.cycle import AllotmentPolicy
from allotment.core.jobstate import JobState
from allotment.core.model import ContractClass, JobKind
from allotment.core.units import cost
from allotment.engine.setup import period_spec
from allotment.ledger.periods import period_at
from allotment.sim.results import SimResult
from allotment.sim.runner import SimOptions, Simulation
from allotment.sim.traces import Sizing, TraceError, fleet_gpus, organisation, read_itp, read_philly, to_jobs, window
from allotment.sim.whatif_report import Replays, burn_plot, human, rows
from allotment.sim.whatif_report import write as write_report
from allotment.sim.workload import SimJob, Workload, placed_gpus
from allotment.store.db import NoDatabaseError, read_only_engine, session_factory
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


@dataclass(frozen=True, slots=True)
class History:
    """What is replayed: the jobs (times from the first submission), the organisation as configuration data, the span
    they cover, and what each budget held in the recorded history (GPU-seconds)."""

    jobs: tuple[SimJob, ...]
    data: dict[str, Any]
    span: int
    recorded: dict[str, float]
    label: str


def history_from_database(url: str, days: float) -> list[SimJob]:
    """The jobs submitted in the last `days` days of an Allotment database, re-timed to start at 0. A finished job's
    work is the time its runs held GPUs; an unfinished one asks for its slice."""
    return list(_database_history(url, days)[0])


def _database_history(url: str, days: float) -> tuple[tuple[SimJob, ...], dict[str, float]]:
    try:
        engine = read_only_engine(url)
    except (NoDatabaseError, ValueError) as exc:
        raise WhatIfError(f"history: {exc}") from None
    try:
        sessions = session_factory(engine)
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
    finally:
        engine.dispose()
    t0 = rows[0].submitted_at
    jobs = tuple(
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
            gpu_types=tuple(r.gpu_types),
            max_runtime=r.max_runtime,
        )
        for r in rows
    )
    recorded: dict[str, float] = {}
    for r in rows:
        recorded[r.budget] = recorded.get(r.budget, 0.0) + r.gpus * r.replicas * held.get(r.id, 0)
    return jobs, recorded


def load_history(history: str, config: Path | None, days: float, skip_days: float = 0) -> History:
    """The history `history` names: an Allotment database URL (with the organisation's `config`), or itp:PATH /
    philly:PATH (a trace, organised by the trace rules), its last `days` days (a trace: `days` after `skip_days`)."""
    if not days > 0:
        raise WhatIfError(f"--days: {days:g} is not a span of history; give a number of days above 0")
    if skip_days < 0:
        raise WhatIfError(f"--skip-days: {skip_days:g} cannot be negative")
    kind, _, rest = history.partition(":")
    if kind in ("itp", "philly") and rest:
        path = Path(rest)
        try:
            if kind == "itp":
                if not path.is_dir():
                    raise TraceError(f"{path}: the ITP trace is a folder of clusterNN.csv[.gz] files")
                every = read_itp(p for p in path.iterdir() if p.name.startswith("cluster"))
            else:
                every = read_philly(path)
        except TraceError as exc:
            raise WhatIfError(f"history: {exc}") from None
        rows = window(every, days, skip_days)
        if not rows:
            raise WhatIfError(f"history: no jobs in days {skip_days:g} to {skip_days + days:g} of {path}")
        jobs = tuple(to_jobs(rows))
        recorded: dict[str, float] = {}
        for r in rows:
            recorded[f"vc-{r.team}"] = recorded.get(f"vc-{r.team}", 0.0) + placed_gpus(r.gpus) * r.duration
        data = organisation(kind, rows, fleet_gpus(rows, Sizing.CONTENDED))
        label = f"{kind} trace {path.name}, days {skip_days:g} to {skip_days + days:g}"
    else:
        if config is None:
            raise WhatIfError("a database history needs --config (the organisation's configuration file)")
        try:
            data = yaml.safe_load(config.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise WhatIfError(f"{config}: {exc}") from None
        jobs, recorded = _database_history(history, days)
        label = f"database {history}"
    span = max(j.submit for j in jobs)
    return History(jobs, data, span, recorded, label)


def horizon_of(history: History) -> int:
    """Seconds the replay runs and the shares are measured over: the history's span (at least an hour), so the
    shares are those of a contended period, not of a queue left to drain."""
    return max(history.span, 3600)


def current_plan_data(data: dict[str, Any], plan: BudgetPlan) -> dict[str, Any]:
    """The organisation as it is, its period calendar starting at the plan's period (the baseline of a what-if)."""
    return {**data, "period": {**dict(data.get("period", {})), "starts": plan.period}}


def replay(
    data: dict[str, Any],
    history: History,
    out: Path,
    name: str,
    start: int,
    seed: int = 1,
    progress: Callable[[float], None] | None = None,
) -> tuple[SimResult, dict[str, int]]:
    """Replay the history in the organisation `data` (written to out/name.yaml) over its horizon from `start`;
    returns the result and each budget's cheapest slice of waiting work would cost (credit-microunits)."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / f"{name}.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise WhatIfError(f"the plan does not fit the organisation: {exc}") from None
    leaves = {b.name for b in cfg.leaves()}
    kept = [j for j in history.jobs if j.budget in leaves]
    if not kept:
        raise WhatIfError("no job of the history belongs to a budget of the planned organisation")
    notes = (f"{len(kept)} jobs of the history ({len(history.jobs) - len(kept)} of unknown budgets left out)",)
    workload = Workload(name, config, tuple(kept), horizon_of(history), notes)
    result = Simulation(workload, AllotmentPolicy(), SimOptions(seed=seed, start=start), label=name).run(progress)
    rate = min(to_core(cfg).rates.values())
    slices: dict[str, int] = {}
    for j in kept:
        need = cost(j.total_gpus, rate, 1000, j.slice_seconds)
        slices[j.budget] = min(slices.get(j.budget, need), need)
    return result, slices


def run_what_if(
    plan: BudgetPlan,
    history: History,
    out: Path,
    *,
    seed: int = 1,
    days: float | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> tuple[Path, Path]:
    """Replay `history` under the current organisation and under `plan`; write report.md and report.html into
    `out`. The plan is expected to have passed service/plan_check (the CLI checks it first)."""
    start = period_start(plan)
    tell = (lambda name: lambda f: progress(name, f)) if progress is not None else (lambda name: None)
    current, _ = replay(current_plan_data(history.data, plan), history, out, "current", start, seed, tell("current"))
    proposed, slices = replay(apply_plan(history.data, plan), history, out, "proposed", start, seed, tell("proposed"))
    period = period_at(period_spec(load_config(out / "proposed.yaml")), start)
    replays = Replays(current, proposed, history.recorded, slices, start, period.end)
    title = f"What-if: plan for {plan.period}" + (f" ({plan.why})" if plan.why else "")
    horizon = horizon_of(history)
    notes = [
        *proposed.notes,
        f"history: {history.label}"
        + (f", its last {days:g} days asked for" if days is not None else "")
        + f"; it spans {human(history.span)}",
        f"replayed from {plan.period} over {human(horizon)} (the history's span): shares are of that horizon",
    ]
    return write_report(title, notes, rows(replays, period.id), out, burn_plot(replays, out))
