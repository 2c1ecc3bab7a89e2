"""Metrics of one simulation: what the evaluation report compares across policies.

Owns: the definitions (each documented in docs/simulation.md) computed from a `SimResult`: utilisation while
demand exceeds supply, waits by class and by size, session start latency, fairness (received versus entitled share
per budget over rolling weeks, and Jain's index), preemptions and the GPU-hours they lost, time to empty drained
nodes, large-gang waits, budget overdrafts and starvation. Times in the result are seconds; reported in hours
unless named otherwise.

Must not: run simulations, read the store, or draw anything.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from allotment.core.decisions import FINAL_REASONS
from allotment.core.model import Seconds
from allotment.sim.observe import IDLE_CAUSES
from allotment.sim.results import JobRecord, SimResult

HOUR = 3600.0
WEEK = 7 * 86400
LARGE_GANG = 64
STARVING = 86400
SIZE_BUCKETS: tuple[tuple[str, int, int], ...] = (("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64), (">64", 65, 1 << 30))
NOT_PREEMPTIONS = frozenset(r.value for r in FINAL_REASONS)


@dataclass(frozen=True, slots=True)
class Quantiles:
    n: int
    p50: float
    p95: float
    mean: float
    p90: float = math.nan
    p99: float = math.nan

    @staticmethod
    def of(values: Iterable[float]) -> Quantiles:
        xs = sorted(values)
        if not xs:
            return Quantiles(0, math.nan, math.nan, math.nan)
        q = quantile
        return Quantiles(len(xs), q(xs, 0.5), q(xs, 0.95), sum(xs) / len(xs), q(xs, 0.9), q(xs, 0.99))


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_xs:
        return math.nan
    pos = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def jain(xs: Sequence[float]) -> float:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when all equal, 1/n when one gets everything."""
    if not xs or not any(xs):
        return math.nan
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def water_fill(
    capacity: float,
    demand: Mapping[str, float],
    weight: Mapping[str, float],
    groups: Sequence[tuple[Collection[str], float]] = (),
) -> dict[str, float]:
    """Weighted max-min fair shares of `capacity`: each budget gets capacity in proportion to its weight, never more
    than it asked for, and the budgets of each (members, cap) group never more than the cap together (a GPU limit
    over a subtree: its leaves share it); what a budget or group cannot use flows to the others.

    Progressive filling: every budget still filling holds level × weight; the level rises until the capacity, a
    budget's demand or a group's cap is reached, and the budgets reached stop there (all of a full group's)."""
    filling = {b for b, d in demand.items() if d > 0 and weight.get(b, 0) > 0}
    share = dict.fromkeys(demand, 0.0)
    while filling:
        fixed = sum(share[b] for b in demand if b not in filling)
        events = [(capacity - fixed) / sum(weight[b] for b in filling)]
        events += [demand[b] / weight[b] for b in filling]
        full: list[tuple[float, set[str]]] = []
        for members, cap in groups:
            inside = filling.intersection(members)
            if inside:
                held = sum(share[b] for b in members if b in share and b not in filling)
                full.append(((cap - held) / sum(weight[b] for b in inside), inside))
        events += [lv for lv, _ in full]
        level = max(min(events), 0.0)
        if level >= events[0] * (1 - 1e-12):  # the capacity is reached: everyone still filling stops here
            for b in filling:
                share[b] = level * weight[b]
            break
        stop = {b for b in filling if demand[b] / weight[b] <= level * (1 + 1e-12)}
        for lv, inside in full:
            if lv <= level * (1 + 1e-12):
                stop |= inside
        for b in stop:
            share[b] = min(demand[b], level * weight[b])
        filling -= stop
    return share


@dataclass(frozen=True, slots=True)
class Metrics:
    policy: str
    jobs: int
    finished: int
    unfinished: int
    utilisation_contended: float
    """Busy GPU-time ÷ fleet GPU-time while offered demand exceeded the fleet (NaN if it never did)."""
    contended_hours: float
    waits: Mapping[str, Quantiles]
    """Per class: hours from submission to first start (a job never started counts its wait so far)."""
    waits_by_size: Mapping[str, Quantiles]
    session_latency: Quantiles
    """Seconds from a session's submission to its first start, for sessions never told they wait on their own limit
    (their user's session count or size, or their budget's GPU limit)."""
    sessions_within_60s: float
    """Of those sessions, the share that started within 60 s."""
    fairness: Mapping[str, float]
    """Per budget: received ÷ entitled GPU-time, summed over the weeks where it had demand."""
    jain: float
    """Mean over weeks of Jain's index of the per-budget received ÷ entitled ratios."""
    preemptions: int
    gpu_hours_lost: float
    drain_empty: Quantiles
    """Hours from a node going bad (drained) to its last job leaving."""
    large_gang_wait: Quantiles
    overdrafts: int
    overdraft_credits: float
    starved: int
    """Jobs that waited more than a day for their first start (or are still waiting after a day)."""
    deadlines: int = 0
    """Jobs with a deadline."""
    deadlines_met: int = 0
    """Of those, the ones finished by their deadline."""
    curve: tuple[tuple[float, int, int], ...] = field(default=(), repr=False)
    """(hour, busy GPUs, offered GPUs) at every change, for plots."""
    session_waits: tuple[float, ...] = field(default=(), repr=False)
    """Every session's start latency in seconds, within limits, sorted (for the CDF plot)."""
    sessions_own_limit: int = 0
    """Sessions told at least once that they wait on their own limit (reported apart from session_latency)."""
    session_latency_all: Quantiles = Quantiles(0, math.nan, math.nan, math.nan)
    """Every session's start latency in seconds, those over their own limit included."""
    eta_error: Quantiles = Quantiles(0, math.nan, math.nan, math.nan)
    """Hours between the start first estimated for a job and its actual first start (jobs given an estimate that
    started); the report shows p50 and p90."""
    opportunistic: int = 0
    """Jobs submitted opportunistic."""
    opportunistic_finished: int = 0
    """Of those, the ones finished."""
    gpu_hours_held: float = math.nan
    """GPU-hours every run held, preempted runs included (what gpu_hours_lost is a share of)."""
    idle_contended: Mapping[str, float] = field(default_factory=dict)
    """Per cause (sim.observe.IDLE_CAUSES): idle GPU-time while demand exceeded supply ÷ the fleet's GPU-time then,
    so the causes and utilisation_contended add up to about 1 (runs being freed by preemption count as busy)."""


def _finish(j: JobRecord, horizon: int) -> int:
    return j.end if j.end is not None else horizon


def _wait(j: JobRecord, horizon: int) -> float:
    return float((j.first_start if j.first_start is not None else horizon) - j.submit)


def curve(result: SimResult) -> list[tuple[int, int, int]]:
    """(time, busy GPUs, offered GPUs) at each change: busy is what runs hold, offered what unfinished submitted jobs
    ask for (waiting or running)."""
    horizon = result.duration
    deltas: dict[int, list[int]] = {}

    def add(t: int, busy: int, offered: int) -> None:
        d = deltas.setdefault(t, [0, 0])
        d[0] += busy
        d[1] += offered

    for r in result.runs:
        add(r.start, r.gpus, 0)
        add(r.end if r.end is not None else horizon, -r.gpus, 0)
    for j in result.jobs:
        if j.submit < horizon:
            add(j.submit, 0, j.gpus)
            add(_finish(j, horizon), 0, -j.gpus)
    busy = offered = 0
    out: list[tuple[int, int, int]] = []
    for t in sorted(deltas):
        busy += deltas[t][0]
        offered += deltas[t][1]
        out.append((t, busy, offered))
    return out


def utilisation_when_contended(points: Sequence[tuple[int, int, int]], fleet: int, horizon: int) -> tuple[float, float]:
    """(utilisation, seconds) over the time offered demand exceeded `fleet`."""
    used = seconds = 0.0
    if not points:
        return math.nan, 0.0
    for (t, busy, offered), nxt in zip(points, [*points[1:], (horizon, 0, 0)], strict=True):
        span = max(min(nxt[0], horizon) - t, 0)
        if offered > fleet and span > 0:
            used += min(busy, fleet) * span
            seconds += span
    return (used / (fleet * seconds) if seconds else math.nan), seconds


def idle_when_contended(
    points: Sequence[tuple[int, int, int]],
    samples: Sequence[tuple[int, tuple[int, ...]]],
    fleet: int,
    horizon: int,
) -> dict[str, float]:
    """Per cause: idle GPU-time ÷ fleet GPU-time over the time offered demand exceeded `fleet` (the spans
    utilisation_when_contended counts), from the step function of idle GPUs per cause each cycle recorded."""
    totals = [0.0] * len(IDLE_CAUSES)
    seconds = 0.0
    bounds = sorted({t for t, _, _ in points} | {t for t, _ in samples} | {horizon})
    pi = si = 0
    offered = 0
    idle: tuple[int, ...] = (0,) * len(IDLE_CAUSES)
    for t, nxt in itertools.pairwise(bounds):
        while pi < len(points) and points[pi][0] <= t:
            offered = points[pi][2]
            pi += 1
        while si < len(samples) and samples[si][0] <= t:
            idle = samples[si][1]
            si += 1
        span = max(min(nxt, horizon) - t, 0)
        if offered > fleet and span > 0:
            seconds += span
            for i, g in enumerate(idle):
                totals[i] += g * span
    if not seconds or not samples:
        return {}
    return {key: totals[i] / (fleet * seconds) for i, (key, _) in enumerate(IDLE_CAUSES)}


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(min(a1, b1) - max(a0, b0), 0)


def fairness(result: SimResult) -> tuple[dict[str, float], float]:
    """Per budget received ÷ entitled GPU-time over the weeks it had demand, and the mean weekly Jain index.
    Entitled: the GPU-time actually delivered that week, water-filled by allocation and capped by each budget's
    demand (what it could have used: at each instant the GPUs its submitted, unfinished jobs ask for, at most its
    GPU limit, `SimResult.limits`) and, for the leaves below a budget with a GPU limit, by what they could have used
    together under it (`SimResult.group_limits`)."""
    horizon = result.duration
    budget_of = {j.id: j.budget for j in result.jobs}
    asks: dict[str, list[tuple[Seconds, Seconds, int]]] = {}
    for j in result.jobs:
        asks.setdefault(j.budget, []).append((j.submit, _finish(j, horizon), j.gpus))
    received_total: dict[str, float] = {}
    entitled_total: dict[str, float] = {}
    indices: list[float] = []
    for w0 in range(0, max(horizon, 1), WEEK):
        w1 = min(w0 + WEEK, horizon)
        received: dict[str, float] = {}
        for r in result.runs:
            got = _overlap(r.start, r.end if r.end is not None else horizon, w0, w1) * r.gpus
            if got:
                received[budget_of[r.job_id]] = received.get(budget_of[r.job_id], 0.0) + got
        demand: dict[str, float] = {}
        for b, spans in asks.items():
            asked = capped_demand(spans, result.limits.get(b), w0, w1)
            if asked:
                demand[b] = asked
        groups = [
            (leaves, capped_demand([s for b in leaves for s in asks.get(b, [])], limit, w0, w1))
            for leaves, limit in result.group_limits.values()
        ]
        weights = {b: float(a) for b, a in result.allocations.items()}
        entitled = water_fill(sum(received.values()), demand, weights, groups)
        ratios = []
        for b, e in entitled.items():
            if e > 0:
                received_total[b] = received_total.get(b, 0.0) + received.get(b, 0.0)
                entitled_total[b] = entitled_total.get(b, 0.0) + e
                ratios.append(received.get(b, 0.0) / e)
        if len(ratios) > 1:
            indices.append(jain(ratios))
    per_budget = {b: received_total[b] / entitled_total[b] for b in sorted(entitled_total)}
    return per_budget, (sum(indices) / len(indices) if indices else math.nan)


def capped_demand(spans: list[tuple[Seconds, Seconds, int]], cap: int | None, w0: Seconds, w1: Seconds) -> float:
    """GPU-seconds asked for within [w0, w1) by (from, to, GPUs) spans, counting at most `cap` GPUs at any instant."""
    if cap is None:
        return float(sum(_overlap(a, b, w0, w1) * g for a, b, g in spans))
    steps: dict[Seconds, int] = {}
    for a, b, g in spans:
        lo, hi = max(a, w0), min(b, w1)
        if lo < hi:
            steps[lo] = steps.get(lo, 0) + g
            steps[hi] = steps.get(hi, 0) - g
    total = 0.0
    level = 0
    last = w0
    for t in sorted(steps):
        total += (t - last) * min(level, cap)
        level += steps[t]
        last = t
    return total


def drain_empty_hours(result: SimResult) -> list[float]:
    out: list[float] = []
    for d in result.drains:
        if d.hard:
            continue
        at = d.at
        holding = [r for r in result.runs if d.node in r.nodes and r.start <= at and (r.end is None or r.end > at)]
        empty = max((r.end if r.end is not None else result.duration for r in holding), default=at)
        out.append((empty - at) / HOUR)
    return out


def compute(result: SimResult) -> Metrics:
    horizon = result.duration
    jobs = [j for j in result.jobs if j.submit < horizon]
    points = curve(result)
    util, contended = utilisation_when_contended(points, result.fleet_gpus, horizon)
    classes = sorted({j.cls for j in jobs})
    waits = {c: Quantiles.of(_wait(j, horizon) / HOUR for j in jobs if j.cls == c) for c in classes}
    by_size = {
        name: Quantiles.of(_wait(j, horizon) / HOUR for j in jobs if lo <= j.gpus <= hi)
        for name, lo, hi in SIZE_BUCKETS
    }
    all_sessions = [j for j in jobs if j.cls == "session"]
    sessions = [_wait(j, horizon) for j in all_sessions if not j.own_limit]
    eta = [
        abs(j.first_start - j.first_eta) / HOUR for j in jobs if j.first_eta is not None and j.first_start is not None
    ]
    per_budget, jain_index = fairness(result)
    preempted = [r for r in result.runs if r.preempt_reason is not None and r.preempt_reason not in NOT_PREEMPTIONS]
    overdrawn = [v for k, v in result.balances.items() if v < 0 and not k.startswith("infrastructure@")]
    finished = sum(1 for j in jobs if j.end is not None)
    due = [j for j in jobs if j.deadline is not None]
    opportunistic = [j for j in jobs if j.contract == "opportunistic"]
    return Metrics(
        policy=result.policy,
        jobs=len(jobs),
        finished=finished,
        unfinished=len(jobs) - finished,
        utilisation_contended=util,
        contended_hours=contended / HOUR,
        waits=waits,
        waits_by_size=by_size,
        session_latency=Quantiles.of(sessions),
        sessions_within_60s=(sum(1 for s in sessions if s <= 60) / len(sessions)) if sessions else math.nan,
        fairness=per_budget,
        jain=jain_index,
        preemptions=len(preempted),
        gpu_hours_lost=sum(r.lost_work * r.gpus for r in preempted) / HOUR,
        drain_empty=Quantiles.of(drain_empty_hours(result)),
        large_gang_wait=Quantiles.of(_wait(j, horizon) / HOUR for j in jobs if j.gpus >= LARGE_GANG),
        overdrafts=len(overdrawn),
        overdraft_credits=-sum(overdrawn) / 1e6,
        starved=sum(1 for j in jobs if _wait(j, horizon) > STARVING),
        deadlines=len(due),
        deadlines_met=sum(1 for j in due if j.end is not None and j.deadline is not None and j.end <= j.deadline),
        curve=tuple((t / HOUR, b, o) for t, b, o in points),
        session_waits=tuple(sorted(sessions)),
        sessions_own_limit=sum(1 for j in all_sessions if j.own_limit),
        session_latency_all=Quantiles.of(_wait(j, horizon) for j in all_sessions),
        eta_error=Quantiles.of(eta),
        opportunistic=len(opportunistic),
        opportunistic_finished=sum(1 for j in opportunistic if j.end is not None),
        gpu_hours_held=sum(((r.end if r.end is not None else horizon) - r.start) * r.gpus for r in result.runs) / HOUR,
        idle_contended=idle_when_contended(points, result.idle, result.fleet_gpus, horizon),
    )
