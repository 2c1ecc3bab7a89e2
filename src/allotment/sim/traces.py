"""Importers for real GPU-cluster traces: Microsoft ITP 2021 and Philly 2017 (data/traces/, gzip-compressed CSV).

Owns: reading the traces, turning each row into a `SimJob`, the budgets rule (each ITP cluster or Philly virtual
cluster becomes one budget, its allocation in proportion to the GPU-hours it asked for), the fleet-sizing rule
(`contended`: the median of the trace's unconstrained GPU demand, so demand exceeds supply about half of the time;
`original`: its peak, where every job could start at once — the sanity check; `partitioned`: each team on its own
nodes, sized by the median of its own demand — the world before sharing, where the strict-FIFO reference runs)
and writing the generated organisation as an Allotment configuration file. Rules and their reasons: docs/simulation.md.

Must not: run anything or read a clock.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from allotment.config import load_config
from allotment.config.fields import parse_duration
from allotment.config.gpus import GpuRule, whole_gpus
from allotment.core.model import ContractClass
from allotment.sim.workload import GPUS_PER_NODE, SimJob, Workload, gang_shape, placed_gpus

HOUR = 3600
MONTH_HOURS = 720


class Sizing(StrEnum):
    CONTENDED = "contended"
    ORIGINAL = "original"
    PARTITIONED = "partitioned"


@dataclass(frozen=True, slots=True)
class TraceRow:
    id: str
    team: str
    submit: int
    duration: int
    gpus: int


SIZING_RULES = {
    Sizing.CONTENDED: "median of the unconstrained demand",
    Sizing.ORIGINAL: "peak of the unconstrained demand",
    Sizing.PARTITIONED: "each team on its own nodes, the median of its own demand",
}


class TraceError(ValueError):
    """A trace that cannot be read: the message names the file (and line and column) and what to do."""


def _open(path: Path, what: str) -> io.TextIOBase:
    if not path.exists():
        raise TraceError(f"{path}: no such file ({what})")
    if path.is_dir():
        raise TraceError(f"{path} is a folder; give the file itself ({what})")
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return io.TextIOWrapper(path.open("rb"), encoding="utf-8", newline="")


def csv_rows(path: Path, what: str, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) of a CSV file with a header, after checking the header names every `required` column."""
    with _open(path, what) as f:
        reader = csv.DictReader(f)
        try:
            header = reader.fieldnames or []
        except (UnicodeDecodeError, OSError, csv.Error) as exc:
            raise TraceError(f"{path}: not a CSV file ({exc}); expected {what}") from None
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(
                f"{path}: missing column(s) {', '.join(missing)}; {what} has the columns {', '.join(required)} "
                f"(found: {', '.join(header) or 'none'})"
            )
        try:
            for row in reader:
                yield reader.line_num, row
        except (UnicodeDecodeError, OSError, csv.Error, EOFError) as exc:
            raise TraceError(f"{path}:{reader.line_num}: cannot be read ({exc})") from None


def number(path: Path, line: int, row: Mapping[str, str], column: str) -> float:
    raw = row.get(column) or ""
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(f"{path}:{line}: column {column}: {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceError(f"{path}:{line}: column {column}: {raw!r} is not a number")
    return value


def gpu_count(path: Path, line: int, row: Mapping[str, str], column: str, rule: GpuRule) -> int:
    try:
        return whole_gpus(row.get(column) or "", rule)
    except ValueError as exc:
        hint = "" if rule is GpuRule.ROUND_UP else "; set `gpus: round-up` in the scenario to round up instead"
        raise TraceError(f"{path}:{line}: column {column}: {exc}{hint}") from None


ITP_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")


def read_itp(paths: Iterable[Path], rule: GpuRule = GpuRule.REFUSE) -> list[TraceRow]:
    """ITP rows; the team is the file's cluster (cluster04.csv.gz → c04)."""
    rows: list[TraceRow] = []
    for path in sorted(paths):
        team = "c" + path.name.split(".")[0].removeprefix("cluster")
        for line, r in csv_rows(path, "an ITP cluster file", ITP_COLUMNS):
            rows.append(
                TraceRow(
                    r["job_id"],
                    team,
                    int(number(path, line, r, "submission_time")),
                    int(number(path, line, r, "duration")),
                    gpu_count(path, line, r, "num_gpu", rule),
                )
            )
    return rows


def read_philly(path: Path, rule: GpuRule = GpuRule.REFUSE) -> list[TraceRow]:
    """Philly rows; the team is the virtual cluster. Times become seconds since the first submission."""
    return read_philly_dated(path, rule)[0]


def read_philly_dated(path: Path, rule: GpuRule = GpuRule.REFUSE) -> tuple[list[TraceRow], datetime]:
    """read_philly, and the instant of the first submission (second 0 of the rows)."""
    rows: list[tuple[datetime, int, int, str]] = []
    for line, r in csv_rows(path, "the Philly trace (philly.csv[.gz])", PHILLY_COLUMNS):
        try:
            at = datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        except ValueError:
            raise TraceError(
                f"{path}:{line}: column timestamp: {r['timestamp']!r} is not YYYY-MM-DD HH:MM:SS"
            ) from None
        rows.append(
            (at, int(number(path, line, r, "duration")), gpu_count(path, line, r, "num_gpus", rule), r["cluster"])
        )
    if not rows:
        raise TraceError(f"{path}: the trace has no rows")
    first = min(r[0] for r in rows)
    ordered = sorted(rows, key=lambda r: (r[0], r[3], r[1], r[2]))
    return [
        TraceRow(f"p{i:06d}", vc, int((at - first).total_seconds()), max(duration, 1), gpus)
        for i, (at, duration, gpus, vc) in enumerate(ordered)
    ], first


def date_window(start: str | None, end: str | None, origin: datetime | None, source: str) -> tuple[float, float | None]:
    """(skip_days, days) of a window given as `from`/`to`: each an offset from the trace's start (7d, 36h) or, for a
    trace with dates (Philly, a job list with timestamps), a date or date and time (2017-10-15, 2017-10-15 08:00)."""

    def at(value: str, name: str) -> float:
        try:
            return parse_duration(value) / 86400
        except (ValueError, TypeError):
            pass
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise TraceError(
                f"{name}: {value!r} is neither an offset (7d, 36h) nor a date (YYYY-MM-DD[ HH:MM])"
            ) from None
        if origin is None:
            raise TraceError(f"{name}: {source} has no dates (its times start at 0): give an offset such as 7d")
        when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return (when - origin).total_seconds() / 86400

    skip = at(start, "from") if start is not None else 0.0
    if skip < 0:
        raise TraceError(f"from: {start} is before the trace's first submission ({origin:%Y-%m-%d %H:%M})")
    if end is None:
        return skip, None
    stop = at(end, "to")
    if stop <= skip:
        raise TraceError(f"to: {end} is not after from ({start or 'the start'})")
    return skip, stop - skip


def window(rows: Sequence[TraceRow], days: float | None, skip_days: float = 0) -> list[TraceRow]:
    """The rows submitted in [skip_days, skip_days + days), re-timed to start at 0 (all when days is None)."""
    if not rows:
        return []
    t0 = min(r.submit for r in rows) + int(skip_days * 86400)
    t1 = None if days is None else t0 + int(days * 86400)
    return [
        TraceRow(r.id, r.team, r.submit - t0, r.duration, r.gpus)
        for r in rows
        if r.submit >= t0 and (t1 is None or r.submit < t1)
    ]


def demand_curve(rows: Iterable[TraceRow]) -> list[tuple[int, int]]:
    """(time, GPUs asked for by jobs that would be running if every job started at once), at every change."""
    deltas: dict[int, int] = {}
    for r in rows:
        g = placed_gpus(r.gpus)
        deltas[r.submit] = deltas.get(r.submit, 0) + g
        deltas[r.submit + r.duration] = deltas.get(r.submit + r.duration, 0) - g
    level, out = 0, []
    for t in sorted(deltas):
        level += deltas[t]
        out.append((t, level))
    return out


def fleet_gpus(rows: Sequence[TraceRow], sizing: Sizing) -> int:
    """GPUs of the replay fleet, in whole 8-GPU nodes: the time-weighted median (contended) or the peak (original)
    of the unconstrained demand over the submission span; never smaller than the largest job."""
    curve = demand_curve(rows)
    end = max(r.submit for r in rows)
    if sizing is Sizing.ORIGINAL:
        target = max(level for _t, level in curve)
    elif sizing is Sizing.PARTITIONED:
        teams = sorted({r.team for r in rows})
        return sum(fleet_gpus([r for r in rows if r.team == t], Sizing.CONTENDED) for t in teams)
    else:
        spans: dict[int, int] = {}
        for (t, level), (t2, _l) in itertools.pairwise(curve):
            if t < end:
                spans[level] = spans.get(level, 0) + min(t2, end) - t
        total, acc, target = sum(spans.values()), 0, 0
        for level in sorted(spans):
            acc += spans[level]
            if acc * 2 >= total:
                target = level
                break
    largest = max(placed_gpus(r.gpus) for r in rows)
    return max(-(-target // GPUS_PER_NODE), -(-largest // GPUS_PER_NODE)) * GPUS_PER_NODE


def partition(rows: Sequence[TraceRow]) -> dict[str, int]:
    """Team → GPUs of its own nodes: the contended size of its own demand."""
    teams = sorted({r.team for r in rows})
    return {t: fleet_gpus([r for r in rows if r.team == t], Sizing.CONTENDED) for t in teams}


def sized(
    rows: Sequence[TraceRow],
    sizing: Sizing,
    nodes: Mapping[str, int] | None,
    shared: bool,
    budget_name: Callable[[str], str],
) -> tuple[dict[str, int] | None, int, str]:
    """(team → GPUs of its own cluster, or None for one shared cluster; the fleet's GPUs; a note) for a replay.
    `nodes` (budget → 8-GPU nodes) fixes each budget's nodes: alone on them, or with `shared` pooled in one cluster;
    every budget of the rows must be given. Otherwise `sizing` decides."""
    if nodes is None:
        parts = partition(rows) if sizing is Sizing.PARTITIONED else None
        gpus = sum(parts.values()) if parts is not None else fleet_gpus(rows, sizing)
        return parts, gpus, f"{gpus} GPUs ({sizing.value}: {SIZING_RULES[sizing]})"
    teams = sorted({r.team for r in rows})
    missing = [budget_name(t) for t in teams if budget_name(t) not in nodes]
    if missing:
        raise TraceError(f"nodes: give every budget its nodes; missing {', '.join(missing)}")
    bad = [b for b, n in nodes.items() if n < 1]
    if bad:
        raise TraceError(f"nodes: {bad[0]} needs at least 1 node")
    per_team = {t: nodes[budget_name(t)] * GPUS_PER_NODE for t in teams}
    largest = {t: max(placed_gpus(r.gpus) for r in rows if r.team == t) for t in teams}
    gpus = sum(per_team.values())
    if shared:
        if max(largest.values()) > gpus:
            raise TraceError(
                f"nodes: the largest job asks for {max(largest.values())} GPUs, more than the {gpus} given"
            )
        return None, gpus, f"{gpus} GPUs: the fixed nodes of every budget, shared"
    small = [t for t in teams if largest[t] > per_team[t]]
    if small:
        t = small[0]
        raise TraceError(
            f"nodes: {budget_name(t)} has a job of {largest[t]} GPUs, more than its {per_team[t]} GPUs alone"
        )
    return per_team, gpus, f"{gpus} GPUs: each budget alone on its fixed nodes"


def cluster_name(name: str, team: str) -> str:
    return f"{name}-{team}".lower()


def organisation(
    name: str,
    rows: Sequence[TraceRow],
    gpus: int,
    parts: dict[str, int] | None = None,
    budget_name: Callable[[str], str] = lambda team: f"vc-{team}",
) -> dict[str, Any]:
    """An Allotment configuration for a trace: one cluster of `gpus` H100s in 8-GPU nodes (or, with `parts`, one
    cluster per team of its own size), a root budget with one leaf per team (named by `budget_name`), each allocated
    the month's GPU-hours in proportion to the GPU-hours the team asked for."""
    asked: dict[str, float] = {}
    for r in rows:
        asked[r.team] = asked.get(r.team, 0.0) + placed_gpus(r.gpus) * r.duration / HOUR
    total = sum(asked.values()) or 1.0
    month = gpus * MONTH_HOURS
    teams = sorted(asked)
    sizes = parts if parts is not None else {name: gpus}
    clusters = [
        {
            "name": cluster_name(name, c) if parts is not None else name,
            "node_groups": [{"gpu_type": "H100", "count": n // GPUS_PER_NODE}],
        }
        for c, n in sorted(sizes.items())
    ]
    leaves = [
        {
            "name": budget_name(t),
            "parent": "org",
            "allocation": max(round(month * asked[t] / total), 1),
            "members": [{"user": f"u-{t}", "role": "member"}],
        }
        for t in teams
    ]
    return {
        "credits": {"H100": 1.0},
        "period": {"length": "month", "starts": "2026-11-01", "carry_over": False},
        "fleet": {"clusters": clusters},
        "users": [{"name": f"u-{t}", "full_name": f"team {t}", "email": f"u-{t}@trace.example"} for t in teams],
        "budgets": [{"name": "org", "allocation": sum(b["allocation"] for b in leaves)}, *leaves],
        "policy": {"default_headroom": 0, "max_reservations": 20},
    }


def to_jobs(
    rows: Iterable[TraceRow], checkpoint: int = HOUR, slice_seconds: int = 4 * HOUR, own_cluster: str | None = None
) -> Iterator[SimJob]:
    """Trace rows as guaranteed batch jobs (the traces hold no sessions) that checkpoint every `checkpoint` seconds
    and accept running opportunistically when their budget cannot fund a slice. With `own_cluster` (the trace's
    name) each job may run only on its team's own cluster."""
    for r in rows:
        gpus, replicas = gang_shape(r.gpus)
        yield SimJob(
            id=r.id[:40],
            submit=r.submit,
            budget=f"vc-{r.team}",
            user=f"u-{r.team}",
            gpus=gpus,
            replicas=replicas,
            work=r.duration,
            contract=ContractClass.GUARANTEED,
            slice_seconds=slice_seconds,
            checkpoint=checkpoint,
            fail_probability=0.0,
            cls="batch",
            clusters=(cluster_name(own_cluster, r.team),) if own_cluster is not None else (),
        )


@dataclass(frozen=True, slots=True)
class Replay:
    """How a trace or a job list is replayed: the fleet (a sizing rule, or fixed nodes per budget alone or shared), the
    window (`skip_days`/`days`, or `start`/`end` as offsets or dates), the days left to drain, the GPU-count rule."""

    sizing: Sizing = Sizing.CONTENDED
    days: float | None = None
    skip_days: float = 0
    drain_days: float = 7
    gpu_rule: GpuRule = GpuRule.REFUSE
    nodes: Mapping[str, int] | None = None
    shared: bool = False
    start: str | None = None
    end: str | None = None

    def window(self, origin: datetime | None, source: str) -> tuple[float, float | None]:
        """(skip_days, days) of the replayed window (date_window when `start` or `end` is given)."""
        if self.start is None and self.end is None:
            return self.skip_days, self.days
        return date_window(self.start, self.end, origin, source)


def trace_workload(kind: str, source: Path, out_dir: Path, replay: Replay | None = None) -> Workload:
    """A replayable workload from a trace (`kind` "itp": a folder of clusterNN.csv[.gz]; "philly": philly.csv[.gz]),
    with its organisation written to `out_dir`. Raises TraceError naming the file and the fix."""
    if kind == "itp":
        if not source.is_dir():
            state = "is a file" if source.exists() else "does not exist"
            raise TraceError(f"{source} {state}: the ITP trace is a folder of clusterNN.csv[.gz] files")
        files = [p for p in source.iterdir() if p.name.startswith("cluster")]
        if not files:
            raise TraceError(f"{source}: no clusterNN.csv[.gz] files in it (the ITP trace's layout)")
        every, origin = read_itp(files, (replay or Replay()).gpu_rule), None
    elif kind == "philly":
        every, origin = read_philly_dated(source, (replay or Replay()).gpu_rule)
    else:
        raise TraceError(f"unknown trace kind {kind!r} (choose: itp, philly, csv)")
    r = replay or Replay()
    skip_days, days = r.window(origin, f"the {kind} trace")
    rows = window(every, days, skip_days)
    if not rows:
        span = (max(r.submit for r in every) - min(r.submit for r in every)) / 86400 if every else 0
        raise TraceError(
            f"no jobs submitted in the chosen window (skip_days {skip_days:g}, days {days}) of {source}: "
            f"the trace spans {span:.1f} days"
        )
    parts, gpus, fleet = sized(rows, r.sizing, r.nodes, r.shared, budget_name=lambda team: f"vc-{team}")
    name = f"{kind}-{r.sizing.value if r.nodes is None else 'fixed'}"
    out_dir.mkdir(parents=True, exist_ok=True)
    config = out_dir / f"{name}.yaml"
    config.write_text(yaml.safe_dump(organisation(kind, rows, gpus, parts), sort_keys=False))
    load_config(config)  # validate what was written
    jobs = tuple(to_jobs(rows, own_cluster=kind if parts is not None else None))
    span = max(r.submit for r in rows)
    notes = (
        f"{kind} trace: {len(jobs)} jobs over {span / 86400:.1f} days from {source.name}",
        f"fleet: {fleet}",
        f"budgets: {len({r.team for r in rows})} teams, allocations ∝ GPU-hours asked",
    )
    return Workload(name, config, jobs, int(span + r.drain_days * 86400), notes)
