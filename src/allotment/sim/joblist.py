"""The generic job-list importer: any trace as a CSV file with documented columns, replayed without code.

Owns: the columns (docs/simulation.md, "Job lists"): `submit`, `budget`, `gpus`, `duration` required; `id`, `user`,
`replicas`, `gpu_types`, `contract`, `kind`, `slice`, `deadline`, `priority`, `max_runtime` optional — reading and
checking each row (a bad value names its file, line and column), and the organisation the jobs run in: the
scenario's own configuration file (every budget and GPU type named must exist in it), or, without one, one generated
as for the ITP and Philly traces (one leaf per budget, allocations in proportion to the GPU-hours asked, a fleet of
H100 nodes sized by the scenario's sizing rule).

Must not: run anything or read a clock; GPU counts follow config/gpus.py's rule, never a silent rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import yaml

from allotment.config import load_config, to_core
from allotment.config.errors import ConfigError
from allotment.config.gpus import GpuRule
from allotment.core.model import ContractClass, JobKind
from allotment.sim.traces import (
    Replay,
    TraceError,
    TraceRow,
    csv_rows,
    gpu_count,
    number,
    organisation,
    sized,
    window,
)
from allotment.sim.workload import SimJob, Workload, gang_shape

REQUIRED = ("submit", "budget", "gpus", "duration")
OPTIONAL = ("id", "user", "replicas", "gpu_types", "contract", "kind", "slice", "deadline", "priority", "max_runtime")
WHAT = f"a job list (columns {', '.join(REQUIRED)}; optional {', '.join(OPTIONAL)})"
DEFAULT_SLICE = 4 * 3600


@dataclass(frozen=True, slots=True)
class ListedJob:
    row: TraceRow
    """What the sizing and budget rules read (team = the budget)."""
    job: SimJob


def _submit_times(path: Path, rows: list[tuple[int, dict[str, str]]]) -> tuple[list[int], datetime | None]:
    """Seconds of each row's submission from the first: numbers as they are, timestamps from the earliest one."""
    raw = [r.get("submit", "").strip() for _, r in rows]
    numeric = [_is_number(v) for v in raw]
    if all(numeric):
        return [int(float(v)) for v in raw], None
    if any(numeric):
        first_n, first_t = (rows[numeric.index(flag)][0] for flag in (True, False))
        raise TraceError(
            f"{path}: column submit mixes seconds (line {first_n}) and timestamps (line {first_t}): use one form"
        )
    stamps: list[datetime] = []
    for (line, _), v in zip(rows, raw, strict=True):
        try:
            at = datetime.fromisoformat(v)
        except ValueError:
            raise TraceError(
                f"{path}:{line}: column submit: {v!r} is neither seconds nor a timestamp (YYYY-MM-DD HH:MM:SS)"
            ) from None
        stamps.append(at if at.tzinfo is not None else at.replace(tzinfo=UTC))
    first = min(stamps)
    return [int((at - first).total_seconds()) for at in stamps], first


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _optional(path: Path, line: int, row: Mapping[str, str], column: str) -> int | None:
    if not (row.get(column) or "").strip():
        return None
    value = number(path, line, row, column)
    if value < 0:
        raise TraceError(f"{path}:{line}: column {column}: {row[column]!r} cannot be negative")
    return int(value)


E = TypeVar("E", ContractClass, JobKind)


def _choice(path: Path, line: int, raw: str, column: str, enum: type[E], default: E) -> E:
    if not raw.strip():
        return default
    try:
        return enum(raw.strip().lower())
    except ValueError:
        choices = ", ".join(e.value for e in enum)
        raise TraceError(f"{path}:{line}: column {column}: {raw!r} is not one of {choices}") from None


def read_job_list(path: Path, rule: GpuRule = GpuRule.REFUSE) -> list[ListedJob]:
    """Every row of the job list as a simulated job (times from the first submission)."""
    return read_job_list_dated(path, rule)[0]


def read_job_list_dated(path: Path, rule: GpuRule = GpuRule.REFUSE) -> tuple[list[ListedJob], datetime | None]:
    """read_job_list, and the instant of the first submission when the list gives timestamps."""
    rows = list(csv_rows(path, WHAT, REQUIRED))
    if not rows:
        raise TraceError(f"{path}: the job list has no rows")
    submits, origin = _submit_times(path, rows)
    out: list[ListedJob] = []
    for (line, r), submit in zip(rows, submits, strict=True):
        budget = r["budget"].strip()
        if not budget:
            raise TraceError(f"{path}:{line}: column budget: empty (every job is charged to a budget)")
        duration = number(path, line, r, "duration")
        if duration <= 0:
            raise TraceError(f"{path}:{line}: column duration: {r['duration']!r} must be more than 0 seconds")
        gpus = gpu_count(path, line, r, "gpus", rule)
        replicas = _optional(path, line, r, "replicas")
        if replicas is not None and replicas < 1:
            raise TraceError(f"{path}:{line}: column replicas: at least 1")
        per, count = (gpus, replicas) if replicas is not None else gang_shape(gpus)
        deadline = _optional(path, line, r, "deadline")
        job = SimJob(
            id=(r.get("id") or "").strip()[:40] or f"r{line:07d}",
            submit=submit,
            budget=budget,
            user=(r.get("user") or "").strip() or f"u-{budget}",
            gpus=per,
            replicas=count,
            work=int(duration),
            kind=_choice(path, line, r.get("kind") or "", "kind", JobKind, JobKind.BATCH),
            contract=_choice(path, line, r.get("contract") or "", "contract", ContractClass, ContractClass.GUARANTEED),
            slice_seconds=_optional(path, line, r, "slice") or DEFAULT_SLICE,
            priority=int(number(path, line, r, "priority")) if (r.get("priority") or "").strip() else 0,
            gpu_types=tuple(t.strip() for t in (r.get("gpu_types") or "").split(";") if t.strip()),
            max_runtime=_optional(path, line, r, "max_runtime"),
            deadline=None if deadline is None else submit + deadline,
            cls="session" if (r.get("kind") or "").strip().lower() == JobKind.SESSION.value else "batch",
        )
        out.append(ListedJob(TraceRow(job.id, budget, submit, job.work, per * count), job))
    ids = [j.job.id for j in out]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise TraceError(f"{path}: column id: {dup!r} appears more than once (ids must be unique)")
    return out, origin


def job_list_workload(
    path: Path,
    out_dir: Path,
    replay: Replay | None = None,
    *,
    organisation_file: Path | None = None,
) -> Workload:
    r = replay or Replay()
    listed, origin = read_job_list_dated(path, r.gpu_rule)
    skip_days, days = r.window(origin, "the job list")
    kept = {r.id for r in window([j.row for j in listed], days, skip_days)}
    if not kept:
        raise TraceError(f"no jobs submitted in the chosen window (skip_days {skip_days:g}, days {days}) of {path}")
    t0 = min(j.row.submit for j in listed) + int(skip_days * 86400)
    jobs = [
        replace(j.job, submit=j.job.submit - t0, deadline=None if j.job.deadline is None else j.job.deadline - t0)
        for j in listed
        if j.row.id in kept
    ]
    rows = [replace(j.row, submit=j.row.submit - t0) for j in listed if j.row.id in kept]
    if organisation_file is not None:
        config = organisation_file
        try:
            core = to_core(load_config(config))
        except (ConfigError, OSError) as exc:
            raise TraceError(f"{config}: {exc}") from None
        known = {b.name for b in core.budgets}
        types = {n.gpu_type for n in core.nodes}
        fleet = f"{core.total_gpus} GPUs of {config.name}"
    else:
        parts, gpus, fleet = sized(rows, r.sizing, r.nodes, r.shared, budget_name=str)
        config = out_dir / "job-list.yaml"
        out_dir.mkdir(parents=True, exist_ok=True)
        org = organisation("csv", rows, gpus, parts, budget_name=str)
        config.write_text(yaml.safe_dump(org, sort_keys=False))
        try:
            load_config(config)
        except ConfigError as exc:
            raise TraceError(f"{path}: the budgets it names cannot make an organisation ({exc})") from None
        known = {j.budget for j in jobs}
        types = {"H100"}
        if parts is not None:
            jobs = [replace(j, clusters=(f"csv-{j.budget}".lower(),)) for j in jobs]
    for j in jobs:
        if j.budget not in known:
            raise TraceError(f"{path}: budget {j.budget!r} (job {j.id}) is not in the organisation {config.name}")
        unknown = [t for t in j.gpu_types if t not in types]
        if unknown:
            raise TraceError(
                f"{path}: job {j.id} asks for GPU type {unknown[0]!r}, which the fleet has none of "
                f"({', '.join(sorted(types))}); give the scenario an organisation with those nodes"
            )
    span = max(j.submit for j in jobs)
    deadlines = sum(1 for j in jobs if j.deadline is not None)
    notes = (
        f"job list: {len(jobs)} jobs over {span / 86400:.1f} days from {path.name}"
        + (f", {deadlines} with deadlines" if deadlines else ""),
        f"fleet: {fleet}",
    )
    return Workload(f"job-list-{path.stem}", config, tuple(sorted(jobs, key=lambda j: (j.submit, j.id))),
                    int(span + r.drain_days * 86400), notes)  # fmt: skip
