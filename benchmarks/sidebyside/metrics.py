"""The side-by-side report: metrics of one replay from what its jobs wrote, and the Markdown table of two.

Owns: merging the jobs' own records (worker.py's events.jsonl: start, term, done; a start that finds the last
segment neither terminated nor done means it was killed) and the replay's record (submissions, drain, empty) into
one ordered event log per run, and computing from that log alone: utilisation, session start latency p50/p95,
received versus entitled share per account, preemptions and work lost, time to empty the drained node, large-gang
wait, completed jobs and the decider's overhead. Both runs are measured the same way from the same kind of records.
Must not: talk to Slurm or to Allotment (everything comes from files, so the tests can check the report against
the log it was computed from).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from allotment.executors.slurm.cli import expand_hostlist
from benchmarks.sidebyside.workload import GPUS_PER_NODE, NODES, JobPlan, Kind

LARGE_GANG_NODES = 4


@dataclass(frozen=True, slots=True)
class Segment:
    job: str
    start: float
    end: float
    gpus: int
    nodes: tuple[str, ...]
    how: str
    """done, term (preempted with notice, checkpointed) or killed."""
    lost: float
    """Seconds of work lost (done since the last checkpoint, not saved)."""


@dataclass
class RunMetrics:
    label: str
    jobs: int
    completed: int
    makespan: float
    utilisation: float
    """GPU-seconds held by jobs over GPU-seconds of the fleet, during the arrival span."""
    session_p50: float
    session_p95: float
    received: dict[str, float]
    entitled: dict[str, float]
    preemptions: int
    killed: int
    reruns: int
    """Runs started after the job had already finished (a preemption that crossed the job's own exit)."""
    work_lost_gpu_s: float
    drain_to_empty: float | None
    large_gang_wait: list[float]
    slurmctld_cpu: float
    overhead: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _killed(restart: dict[str, Any], opened_at: float) -> dict[str, Any]:
    """The end of a segment killed without notice, read from the beat the next start found.

    A beat older than the segment's own start was written by an earlier segment: the killed one died before its
    first beat, so it ended at its start (as far as the records tell) and lost nothing past its checkpoint.
    """
    beat = restart.get("prev_beat") or {}
    if float(beat.get("t", restart["t"])) < opened_at:
        beat = {}
    lost = max(0.0, float(beat.get("done", restart["saved"])) - float(restart["saved"]))
    return {"ev": "killed", "t": max(opened_at, float(beat.get("t", opened_at))), "lost": lost}


def event_log(rundir: Path, plans: Iterable[JobPlan]) -> list[dict[str, Any]]:
    """Every event of one replay in time order: submit, start, term, killed, done per job; drain and empty."""
    run = json.loads((rundir / "run.json").read_text())
    out: list[dict[str, Any]] = []
    for plan in plans:
        base = {"job": plan.name, "account": plan.account, "kind": plan.kind.value, "gpus": plan.total_gpus}
        if plan.name in run["submitted"]:
            out.append({**base, "ev": "submit", "t": run["submitted"][plan.name]})
        opened_at: float | None = None
        for e in _read_jsonl(rundir / plan.name / "events.jsonl"):
            if e["ev"] == "start":
                if opened_at is not None:
                    out.append({**base, **_killed(e, opened_at)})
                nodes = expand_hostlist(e["nodes"]) if e.get("nodes") else []
                out.append({**base, "ev": "start", "t": e["t"], "nodes": nodes, "saved": e["saved"]})
                opened_at = float(e["t"])
            elif e["ev"] in ("term", "done"):
                out.append({**base, "ev": e["ev"], "t": e["t"], "lost": 0.0})
                opened_at = None
    for ev in ("drain_at", "empty_at"):
        if run.get(ev) is not None:
            out.append({"ev": ev.removesuffix("_at"), "t": run[ev]})
    return sorted(out, key=lambda e: (e["t"], e["ev"] != "submit"))


def segments(log: Sequence[dict[str, Any]]) -> list[Segment]:
    """Run segments (start to term, killed or done) from an event log."""
    opened: dict[str, dict[str, Any]] = {}
    out: list[Segment] = []
    for e in log:
        job = e.get("job")
        if job is None:
            continue
        if e["ev"] == "start":
            opened[job] = e
        elif e["ev"] in ("term", "killed", "done") and job in opened:
            s = opened.pop(job)
            out.append(Segment(job, s["t"], e["t"], e["gpus"], tuple(s.get("nodes", ())), e["ev"], e["lost"]))
    return out


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def compute(rundir: Path, plans: Sequence[JobPlan], entitled: dict[str, float]) -> RunMetrics:
    run = json.loads((rundir / "run.json").read_text())
    log = event_log(rundir, plans)
    (rundir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in log))
    segs = segments(log)
    t0, span = float(run["t0"]), float(run["span"])
    by_name = {p.name: p for p in plans}
    first_start: dict[str, float] = {}
    for e in log:
        if e["ev"] == "start":
            first_start.setdefault(e["job"], e["t"])
    done = {e["job"] for e in log if e["ev"] == "done"}
    finished: set[str] = set()
    reruns = 0
    for e in log:
        if e["ev"] == "start" and e["job"] in finished:
            reruns += 1
        elif e["ev"] == "done":
            finished.add(e["job"])
    held = dict.fromkeys(entitled, 0.0)
    for s in segs:
        held[by_name[s.job].account] += s.gpus * _overlap(s.start, s.end, t0, t0 + span)
    total = sum(held.values())
    submitted = run["submitted"]
    waits = {j: first_start[j] - submitted[j] for j in first_start if j in submitted}
    sessions = [waits[p.name] for p in plans if p.kind is Kind.SESSION and p.name in waits]
    gangs = [waits[p.name] for p in plans if p.nodes >= LARGE_GANG_NODES and p.name in waits]
    ends = [e["t"] for e in log if e["ev"] == "done"]
    drain, empty = run.get("drain_at"), run.get("empty_at")
    return RunMetrics(
        label=run["label"],
        jobs=len(plans),
        completed=len(done),
        makespan=(max(ends) - t0) if ends else math.nan,
        utilisation=total / (NODES * GPUS_PER_NODE * span),
        session_p50=percentile(sessions, 50),
        session_p95=percentile(sessions, 95),
        received={a: (h / total if total else 0.0) for a, h in held.items()},
        entitled=dict(entitled),
        preemptions=sum(1 for s in segs if s.how in ("term", "killed")),
        killed=sum(1 for s in segs if s.how == "killed"),
        reruns=reruns,
        work_lost_gpu_s=sum(s.lost * s.gpus for s in segs),
        drain_to_empty=(empty - drain) if drain is not None and empty is not None else None,
        large_gang_wait=sorted(gangs),
        slurmctld_cpu=float(run["slurmctld_cpu"]),
        overhead={k: float(v) for k, v in run["overhead"].items()},
    )


def _num(x: float | None, fmt: str = ".1f", unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:{fmt}}{unit}"


def _overhead(m: RunMetrics) -> str:
    text = f"slurmctld {m.slurmctld_cpu:.1f} s CPU"
    if m.overhead.get("engine_cycles"):
        cycles = m.overhead["engine_cycles"]
        text += (
            f" + engine {m.overhead['engine_cycle_s']:.1f} s in {cycles:.0f} cycles "
            f"({1000 * m.overhead['engine_cycle_s'] / cycles:.0f} ms each, deciding "
            f"{1000 * m.overhead['engine_decide_s'] / cycles:.1f} ms)"
        )
    return text


def table(runs: Sequence[RunMetrics], hour: float) -> str:
    """A Markdown table: one row per metric, one column per run."""
    head = "| metric | " + " | ".join(m.label for m in runs) + " |\n|---|" + "---|" * len(runs) + "\n"
    rows: list[tuple[str, list[str]]] = [
        ("jobs completed", [f"{m.completed} / {m.jobs}" for m in runs]),
        ("makespan (last job done)", [_num(m.makespan, ".0f", " s") for m in runs]),
        ("utilisation during the arrival span", [_num(100 * m.utilisation, ".1f", " %") for m in runs]),
        ("session start latency p50 / p95", [f"{_num(m.session_p50)} / {_num(m.session_p95)} s" for m in runs]),
        ("preemptions (of which killed without notice)", [f"{m.preemptions} ({m.killed})" for m in runs]),
        ("runs of jobs that had already finished", [str(m.reruns) for m in runs]),
        ("work lost", [f"{m.work_lost_gpu_s:.0f} GPU·s" for m in runs]),
        ("time to empty the drained node", [_num(m.drain_to_empty, ".0f", " s") for m in runs]),
        (
            f"large-gang wait ({LARGE_GANG_NODES}+ nodes)",
            [", ".join(f"{w:.0f} s" for w in m.large_gang_wait) or "—" for m in runs],
        ),
        ("scheduling overhead", [_overhead(m) for m in runs]),
    ]
    for account in runs[0].entitled:
        rows.append(
            (
                f"share received / entitled: {account}",
                [f"{100 * m.received[account]:.1f} % / {100 * m.entitled[account]:.1f} %" for m in runs],
            )
        )
    rows.append(
        (
            "fairness gap (half the sum of received − entitled over accounts, absolute)",
            [_num(100 * sum(abs(m.received[a] - m.entitled[a]) for a in m.entitled) / 2, ".1f", " %") for m in runs],
        )
    )
    body = "".join(f"| {name} | " + " | ".join(cells) + " |\n" for name, cells in rows)
    return head + body + f"\nOne lab hour = {hour:g} wall seconds.\n"
