"""Prometheus metrics: what the engine and the API count as they go, and what the database shows at scrape time.

Owns: the process registry (cycle time and phases, cycles, starts, preemptions by reason, credits charged, cycle
failures, leadership, API latency by route, rate-limited submissions), `DatabaseCollector` (queue depth by contract
class and kind, GPUs in use by budget and run class, nodes by state — draining ones are the drains — credits spent
per budget in the current period, age of the last cycle), `exposition` for /metrics, and `ObservedStore`, a
SchedulingStore wrapper that records each cycle, logs starts and preemptions with their job and budget ids, paces
cycles (a minimum wall-clock gap, so API writes reach the database between them) and refuses to cycle once this
instance no longer leads.

Must not: change what a cycle decides or writes.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from allotment.changes.room import ROOM_KEY
from allotment.changes.unit import CycleUnit
from allotment.core.jobstate import JobState
from allotment.core.model import Seconds
from allotment.ops.state import PROCESS
from allotment.ports.store import CycleReport, Intent, SchedulingStore
from allotment.store.accounts import spending
from allotment.store.db import reading
from allotment.store.records import get_state
from allotment.store.tables import JobRow, NodeRow, RunRow

MICRO = 1_000_000
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
log = logging.getLogger("allotment.decisions")

REGISTRY = CollectorRegistry()
CYCLE_SECONDS = Histogram(
    "allotment_cycle_seconds",
    "Wall time of one scheduling cycle (load + decide + apply)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10),
    registry=REGISTRY,
)
PHASE_SECONDS = Histogram(
    "allotment_cycle_phase_seconds",
    "Wall time of a cycle's phase",
    ["phase"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
    registry=REGISTRY,
)
CYCLES = Counter("allotment_cycles_total", "Scheduling cycles completed", registry=REGISTRY)
CYCLE_FAILURES = Counter(
    "allotment_cycle_failures_total", "Engine loops ended by a database error (retried)", registry=REGISTRY
)
STARTS = Counter("allotment_starts_total", "Jobs started", ["rule"], registry=REGISTRY)
PREEMPTIONS = Counter("allotment_preemptions_total", "Jobs preempted", ["reason"], registry=REGISTRY)
CHARGED = Counter("allotment_charged_credits_total", "Credits charged by cycles (budget burn)", registry=REGISTRY)
LEADER = Gauge(
    "allotment_leader",
    "1 while this instance schedules, 0 while it is a standby",
    registry=REGISTRY,
    multiprocess_mode="livemax",  # with API workers: the engine process's value, not one series per worker
)
API_SECONDS = Histogram(
    "allotment_api_request_seconds",
    "HTTP API latency by method, route template and status",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
    registry=REGISTRY,
)
RATE_LIMITED = Counter(
    "allotment_rate_limited_total", "Requests refused with 429 (per-user submission or token limit)", registry=REGISTRY
)


class DatabaseCollector(Collector):
    """Gauges read from the database at scrape time (a handful of grouped queries)."""

    def __init__(self, sessions: sessionmaker[Session], now: Callable[[], Seconds], period: Callable[[], str]):
        self.sessions, self.now, self.period = sessions, now, period

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queue = GaugeMetricFamily("allotment_queue_depth", "Pending jobs", labels=["contract", "kind"])
        gpus = GaugeMetricFamily("allotment_gpus_in_use", "GPUs held by running jobs", labels=["budget", "run_class"])
        nodes = GaugeMetricFamily("allotment_nodes", "Nodes by state (draining: drains)", labels=["state"])
        spent = GaugeMetricFamily(
            "allotment_budget_spent_credits",
            "Credits spent in the current period (charges less refunds)",
            labels=["budget"],
        )
        age = GaugeMetricFamily("allotment_last_cycle_age_seconds", "Engine seconds since the last cycle")
        room = GaugeMetricFamily(
            "allotment_session_room_gpus",
            "GPUs kept free or fast-leaving for sessions, as the last cycle sized each cluster's session room",
            labels=["cluster"],
        )
        whole = GaugeMetricFamily(
            "allotment_session_room_whole_gpus",
            "GPUs of the session room kept on one node (the largest recent session; 0: any spread)",
            labels=["cluster"],
        )
        with reading(self.sessions) as s:
            for contract, kind, n in s.execute(
                select(JobRow.contract, JobRow.kind, func.count())
                .where(JobRow.state == JobState.PENDING.value)
                .group_by(JobRow.contract, JobRow.kind)
            ):
                queue.add_metric([contract, kind], n)
            held: dict[tuple[str, str], int] = {}
            for budget, run_class, placement in s.execute(
                select(JobRow.budget, RunRow.run_class, RunRow.placement)
                .join(JobRow, JobRow.id == RunRow.job_id)
                .where(RunRow.ended_at.is_(None))
            ):
                key = (budget, run_class)
                held[key] = held.get(key, 0) + sum(len(a["gpus"]) for a in placement)
            for (budget, run_class), n in sorted(held.items()):
                gpus.add_metric([budget, run_class], n)
            for state, n in s.execute(select(NodeRow.state, func.count()).group_by(NodeRow.state)):
                nodes.add_metric([state], n)
            for budget, amount in sorted(spending(s, self.period()).items()):
                spent.add_metric([budget], amount / MICRO)
            last = get_state(s, "last_cycle")
            rooms = get_state(s, ROOM_KEY)
        if last is not None:
            age.add_metric([], max(0, self.now() - int(last)))
        for cluster, size in sorted(rooms.items() if isinstance(rooms, dict) else ()):
            room.add_metric([str(cluster)], int(size.get("gpus", 0)))
            whole.add_metric([str(cluster)], int(size.get("whole", 0)))
        yield from (queue, gpus, nodes, spent, age, room, whole)


def exposition(collector: DatabaseCollector | None) -> bytes:
    """The /metrics body: the process's counters and histograms (with API workers, $PROMETHEUS_MULTIPROC_DIR is
    set and they are summed over the engine and every worker process), then the database gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        body = generate_latest(merged)
    else:
        body = generate_latest(REGISTRY)
    if collector is not None:
        scrape = CollectorRegistry()
        scrape.register(collector)
        body += generate_latest(scrape)
    return body


class LostLeadership(RuntimeError):
    """This instance no longer holds the scheduler lock: it must stop cycling."""


@dataclass
class ObservedStore:
    """The Store port, observed: every cycle is timed and counted, its starts and preemptions logged with job and
    budget ids; `leads` is asked before each cycle and a False stops the engine (LostLeadership); cycles start at
    least `min_gap` wall seconds apart."""

    inner: SchedulingStore[CycleUnit]
    sessions: sessionmaker[Session]
    leads: Callable[[], bool] = lambda: True
    min_gap: float = 0.0
    """Wall seconds from the end of one cycle to the start of the next, at least (pacing)."""
    _last_end: float = 0.0

    @contextmanager
    def transaction(self, now: Seconds, *, cycle: bool = False) -> Iterator[CycleUnit]:
        """The inner store's unit of work; a cycle's is first checked for leadership and paced, and timed."""
        if cycle:
            if not self.leads():
                raise LostLeadership("the scheduler lock was lost")
            pause = self._last_end + self.min_gap - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        t0 = time.perf_counter()
        with self.inner.transaction(now, cycle=cycle) as tx:
            yield tx
        if cycle:
            CYCLE_SECONDS.observe(time.perf_counter() - t0)
            self._last_end = time.monotonic()

    def cycled(self, report: CycleReport) -> None:
        self.inner.cycled(report)
        for phase, seconds in report.timings.items():
            PHASE_SECONDS.labels(phase).observe(seconds)
        CYCLES.inc()
        CHARGED.inc(report.charged / MICRO)
        for start in report.decisions.starts:
            STARTS.labels(start.rule).inc()
        for preempt in report.decisions.preempts:
            PREEMPTIONS.labels(preempt.reason.value).inc()
        PROCESS.cycled()
        if log.isEnabledFor(logging.INFO) and (report.decisions.starts or report.decisions.preempts):
            self._log(report)

    def _log(self, report: CycleReport) -> None:
        ids = [s.job_id for s in report.decisions.starts] + [p.job_id for p in report.decisions.preempts]
        with reading(self.sessions) as s:
            rows = s.execute(select(JobRow.id, JobRow.budget).where(JobRow.id.in_(ids))).all()
        budgets = {row[0]: row[1] for row in rows}
        for start in report.decisions.starts:
            nodes = ",".join(a.node for a in start.placement)
            log.info(
                "start %s on %s (%s)", start.job_id, nodes, start.rule,
                extra={"job": start.job_id, "budget": budgets.get(start.job_id), "node": nodes, "event": "start"},
            )  # fmt: skip
        for p in report.decisions.preempts:
            log.info(
                "preempt %s: %s, grace %ss", p.job_id, p.reason.value, p.grace,
                extra={"job": p.job_id, "budget": budgets.get(p.job_id), "event": "preempt", "reason": p.reason.value},
            )  # fmt: skip

    def undelivered(self) -> list[Intent]:
        return list(self.inner.undelivered())

    def mark_delivered(self, ids: Sequence[int], at: Seconds) -> None:
        self.inner.mark_delivered(ids, at)

    def open_runs(self) -> dict[str, int]:
        return dict(self.inner.open_runs())

    def next_deadline(self, now: Seconds) -> Seconds | None:
        return self.inner.next_deadline(now)
