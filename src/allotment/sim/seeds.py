"""Across seeds: each headline metric's mean and 95 % confidence interval, and the seed list a user writes.

Owns: parsing a seed list ("1-5", "1,3,9", "2-4,8"), the headline metrics taken from one run's Metrics (the numbers a
report compares across policies: utilisation under contention and why the idle GPUs idled, session start p95 and p99,
share of sessions within 60 s, the ETA error, waits p95 by size, Jain's index, the worst budget's received ÷
entitled, preemptions and GPU-hours lost, drain times, starvation), and their mean with a Student-t 95 % interval
across seeds (NaN values — a metric a seed had no sample for — are left out of its n).

Must not: run simulations or format tables (report.py does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from allotment.sim.metrics import Metrics
from allotment.sim.observe import IDLE_CAUSES

T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
"""Student's t, two-sided 95 %, for 1 … 30 degrees of freedom (beyond: 1.96)."""
MAX_SEEDS = 1000


class SeedError(ValueError):
    """A seed list that cannot be read; the message says which part and the form expected."""


def parse_seeds(text: str) -> list[int]:
    """ "1-5" → [1, 2, 3, 4, 5]; "1,3,9"; ranges and single seeds mixed; each seed once, in the order given."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise SeedError(f"seeds: {part!r} is not a seed or a range (write e.g. 1-5 or 1,3,9)") from None
        if first < 0 or last < first:
            raise SeedError(f"seeds: {part!r} must be a non-negative seed or a rising range such as 1-5")
        seeds += [s for s in range(first, last + 1) if s not in seeds]
        if len(seeds) > MAX_SEEDS:
            raise SeedError(f"seeds: at most {MAX_SEEDS} seeds")
    return seeds


HEADLINES: tuple[tuple[str, str], ...] = (
    ("utilisation", "utilisation while demand > supply, %"),
    *((f"idle_{key}", f"idle while contended: {meaning}, %") for key, meaning in IDLE_CAUSES),
    ("session_p95", "session start within limits p95, s"),
    ("session_p99", "session start within limits p99, s"),
    ("sessions_60s", "sessions within limits started within 60 s, %"),
    ("own_limit", "sessions told they wait on their own limit"),
    ("eta_p50", "first estimated start off by p50, h"),
    ("eta_p90", "first estimated start off by p90, h"),
    ("wait_1_p95", "wait 1 GPU p95, h"),
    ("wait_8_p95", "wait 2-8 GPUs p95, h"),
    ("wait_64_p95", "wait 9-64 GPUs p95, h"),
    ("large_p95", "large gangs (≥ 64 GPUs) wait p95, h"),
    ("jain", "fairness: Jain's index"),
    ("worst_share", "fairness: worst budget received ÷ entitled"),
    ("preemptions", "preemptions"),
    ("lost", "GPU-hours lost to preemption"),
    ("lost_share", "GPU-hours lost to preemption, % of those held"),
    ("drain_p95", "drained node empty after p95, h"),
    ("starved", "jobs waiting > 1 day"),
    ("finished", "jobs finished, %"),
    ("opportunistic_finished", "opportunistic jobs finished, %"),
    ("deadlines", "deadlines met, %"),
)
"""(key, label) of each metric compared across seeds, in report order."""


def headline(m: Metrics) -> dict[str, float]:
    return {
        "utilisation": 100 * m.utilisation_contended,
        **{f"idle_{key}": 100 * m.idle_contended.get(key, math.nan) for key, _ in IDLE_CAUSES},
        "session_p95": m.session_latency.p95,
        "session_p99": m.session_latency.p99,
        "sessions_60s": 100 * m.sessions_within_60s,
        "own_limit": float(m.sessions_own_limit),
        "eta_p50": m.eta_error.p50,
        "eta_p90": m.eta_error.p90,
        "wait_1_p95": m.waits_by_size["1"].p95,
        "wait_8_p95": m.waits_by_size["2-8"].p95,
        "wait_64_p95": m.waits_by_size["9-64"].p95,
        "large_p95": m.large_gang_wait.p95,
        "jain": m.jain,
        "worst_share": min(m.fairness.values(), default=math.nan),
        "preemptions": float(m.preemptions),
        "lost": m.gpu_hours_lost,
        "lost_share": 100 * m.gpu_hours_lost / m.gpu_hours_held if m.gpu_hours_held > 0 else math.nan,
        "drain_p95": m.drain_empty.p95,
        "starved": float(m.starved),
        "finished": 100 * m.finished / m.jobs if m.jobs else math.nan,
        "opportunistic_finished": 100 * m.opportunistic_finished / m.opportunistic if m.opportunistic else math.nan,
        "deadlines": 100 * m.deadlines_met / m.deadlines if m.deadlines else math.nan,
    }


@dataclass(frozen=True, slots=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int
    """Seeds with a value (NaN left out)."""

    @property
    def half(self) -> float:
        return (self.high - self.low) / 2


def interval(values: Sequence[float]) -> Interval:
    """Mean and Student-t 95 % interval of `values` (NaN left out); with one value the interval is that value."""
    xs = [v for v in values if not math.isnan(v)]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = sum(xs) / n
    if n == 1:
        return Interval(mean, mean, mean, 1)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    t = T_975[n - 2] if n - 1 <= len(T_975) else 1.96
    half = t * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def across(runs: Sequence[Metrics]) -> dict[str, Interval]:
    """Each headline metric's interval across the runs of one policy (one per seed)."""
    values = [headline(m) for m in runs]
    return {key: interval([v[key] for v in values]) for key, _ in HEADLINES}
