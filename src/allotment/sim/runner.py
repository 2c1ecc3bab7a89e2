"""The discrete-event simulator: a workload through the real engine cycle on a simulated clock.

Owns: the event loop. The engine and store are built by sim/world.assemble — the in-memory store by default, or the
server's own wiring on SQLite (`store="sqlite"`) — with the simulator's clock, executor (sim/executor.py) and the
policy under test. The loop submits arrivals through the world's submission path (World), plays the operator for
hardware faults (a bad node is drained, or lost and marked down, then repaired once empty), runs `Engine.step()` (poll
→ hear → the atomic cycle → deliver) and jumps the clock to the next interesting time: the next arrival, the next
simulated exit or session event, `store.next_deadline` (slice ends, kill deadlines), the policy's `wake_at`, the next
fault or repair. Cycles are at least `resolution` seconds apart (1 s by default), so what happens within it is handled
by one cycle, as the server coalesces submissions that wake it while a cycle runs. At the end it reads what happened
back from the store.

Must not: decide (the policy does), apply decisions (the store does), touch a store's tables (world.py does) or
compute metrics (metrics.py does).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from allotment.config.schema import AllotmentConfig
from allotment.core.jobstate import ACTIVE
from allotment.core.model import JobKind, NodeState, Seconds
from allotment.core.policy import Policy
from allotment.ledger import INFRASTRUCTURE
from allotment.ledger.entries import EntryKind
from allotment.sim.executor import SimExecutor
from allotment.sim.observe import IdleWatch, WaitWatch
from allotment.sim.results import DrainRecord, JobRecord, RunRecord, SimResult
from allotment.sim.workload import SimJob, Workload
from allotment.sim.world import LedgerLine, assemble
from allotment.store.jobs import Submission


class SimClock:
    """The Clock port on simulated time: `now` moves only when the simulator moves it."""

    def __init__(self, now: Seconds) -> None:
        self.t = now

    def now(self) -> Seconds:
        return self.t

    def wait(self, seconds: float) -> None:
        self.t += max(int(seconds), 0)


@dataclass(frozen=True, slots=True)
class Faults:
    """Hardware faults: each node goes bad at random (a Poisson process of `per_node_day` faults a day); a
    `hard_fraction` of them lose the node at once (its work is lost and refunded), the rest only drain it. A bad
    node is repaired `repair` seconds after it is empty."""

    per_node_day: float = 0.0
    hard_fraction: float = 0.2
    repair: Seconds = 4 * 3600


@dataclass(frozen=True, slots=True)
class SimOptions:
    seed: int = 1
    resolution: Seconds = 1
    """Events are coalesced to this: a cycle runs at the first interesting instant at least `resolution` seconds
    after the last one (decision 48). The engine's periodic work (charging, decay) keeps its own schedule."""
    idle_gap: Seconds = 900
    """Longest simulated gap between cycles while jobs wait (time-based rules: idle sessions, starvation)."""
    faults: Faults = field(default_factory=Faults)
    report_checkpoints: bool = True
    """Jobs that checkpoint tell the scheduler when they do (the simulated executor's CHECKPOINTED events)."""
    store: str = "memory"
    """Where state is kept: "memory" (the in-memory store) or "sqlite" (the SQL store on `database_url`)."""
    database_url: str = "sqlite://"
    charge_every: Seconds = 6 * 3600
    """How often open runs are charged between their start and end (the store's `charge_every`). Runs are always
    charged when they end or change price, and the snapshot counts what is not posted yet, so balances and
    decisions are exact whatever this is; a long interval only writes fewer ledger rows (decision 0011)."""
    start: Seconds = 1_793_491_200
    """Unix time of simulated second 0 (2026-11-01T00:00:00Z, the example organisations' first period)."""


@dataclass
class _Repairs:
    bad: dict[str, DrainRecord] = field(default_factory=dict)
    due: dict[str, Seconds] = field(default_factory=dict)


class Simulation:
    def __init__(
        self, workload: Workload, policy: Policy, options: SimOptions | None = None, label: str | None = None
    ) -> None:
        """`label` names the policy in the result (default: the policy's `name`)."""
        self.workload = workload
        self.policy = policy
        self.label: str = label or str(getattr(policy, "name", type(policy).__name__))
        self.options = options or SimOptions()
        self.clock = SimClock(self.options.start)
        self.jobs = {j.id: j for j in workload.jobs}
        self.executor = SimExecutor(
            self.jobs, self.options.seed, self.options.start, self.clock.now, self.options.report_checkpoints
        )
        o = self.options
        self.idle = IdleWatch(policy, o.start)
        self.built = assemble(
            o.store, Path(workload.config), o.database_url, o.charge_every, self.executor, self.idle, self.clock
        )
        self.engine = self.built.engine
        self.world = self.built.world
        self.drains: list[DrainRecord] = []
        self._repairs = _Repairs()
        self.cycles = 0
        self.events = 0
        self.watch = WaitWatch()

    # -- the loop ----------------------------------------------------------------------------------------------
    def run(self, progress: Callable[[float], None] | None = None) -> SimResult:
        """Play the workload to its horizon (or until every job has ended) and read the results back. The store is
        closed afterwards, whatever happens: a simulation on SQLite leaves its database file as it finished."""
        try:
            return self._loop(progress)
        finally:
            self.world.close()

    def _loop(self, progress: Callable[[float], None] | None) -> SimResult:
        opts, start = self.options, self.options.start
        horizon = start + self.workload.horizon
        arrivals = sorted(self.workload.jobs, key=lambda j: (j.submit, j.id))
        faults = self._fault_times(horizon)
        nxt_arrival, nxt_fault = 0, 0
        wall = time.perf_counter()
        decide_s = 0.0
        self.engine.reconcile()
        while True:
            now = self.clock.now()
            due = []
            while nxt_arrival < len(arrivals) and start + arrivals[nxt_arrival].submit <= now:
                due.append(arrivals[nxt_arrival])
                nxt_arrival += 1
            self._submit(due, now)
            while nxt_fault < len(faults) and faults[nxt_fault][0] <= now:
                self._fault(*faults[nxt_fault])
                nxt_fault += 1
            self._repair(now)
            polled = self.executor.poll_count
            report = self.engine.step()
            self.watch.saw(report.decisions)
            self.cycles += 1
            self.events += len(due) + (self.executor.poll_count - polled)
            decide_s += report.timings.get("decide", 0.0)
            self._watch_drains(now)
            if progress is not None:
                progress(min((now - start) / max(self.workload.horizon, 1), 1.0))
            active = self._active()
            if now >= horizon or (nxt_arrival >= len(arrivals) and active == 0):
                break
            candidates = [
                start + arrivals[nxt_arrival].submit if nxt_arrival < len(arrivals) else None,
                self.executor.next_event_time(),
                self.engine.store.next_deadline(now),
                report.decisions.wake_at,
                faults[nxt_fault][0] if nxt_fault < len(faults) else None,
                min(self._repairs.due.values()) if self._repairs.due else None,
                now + opts.idle_gap if active else None,
            ]
            nxt = min(t for t in candidates if t is not None) if any(c is not None for c in candidates) else horizon
            self.clock.t = min(max(nxt, now + opts.resolution), horizon)
        return self._result(time.perf_counter() - wall, decide_s)

    # -- acting ------------------------------------------------------------------------------------------------
    def _submit(self, due: Iterable[SimJob], now: Seconds) -> None:
        due = list(due)
        if not due:
            return
        subs = [
            Submission(
                budget=j.budget,
                user=j.user,
                command=("sim", j.cls),
                gpus=j.gpus,
                replicas=j.replicas,
                name=j.cls,
                kind=j.kind,
                contract=j.contract,
                slice_seconds=j.slice_seconds,
                priority=j.priority,
                grace=j.grace,
                fallback_opportunistic=j.fallback_opportunistic,
                clusters=j.clusters,
                gpu_types=j.gpu_types,
                max_runtime=j.max_runtime,
                job_id=j.id,
            )
            for j in due
        ]
        self.world.submit(subs, now)  # one batch for the instant's arrivals, as the API's group commit
        self.watch.submitted((j.id for j in due), (j.id for j in due if j.kind is JobKind.SESSION))

    def _fault_times(self, horizon: Seconds) -> list[tuple[Seconds, str, bool]]:
        f = self.options.faults
        if f.per_node_day <= 0:
            return []
        rng = random.Random(self.options.seed * 7919 + 17)
        nodes = self.world.node_names()
        out: list[tuple[Seconds, str, bool]] = []
        for node in nodes:
            t = float(self.options.start)
            while True:
                t += rng.expovariate(f.per_node_day / 86400)
                if t >= horizon:
                    break
                out.append((int(t), node, rng.random() < f.hard_fraction))
        return sorted(out)

    def _fault(self, at: Seconds, node: str, hard: bool) -> None:
        if node in self._repairs.bad:
            return
        if not self.world.fault(node, NodeState.DOWN if hard else NodeState.DRAINING, at):
            return
        if hard:
            self.executor.fail_node(node, at)
        record = DrainRecord(node, at - self.options.start, hard)
        self.drains.append(record)
        self._repairs.bad[node] = record

    def _watch_drains(self, now: Seconds) -> None:
        """Schedule the repair of every bad node that no open run holds any more."""
        waiting = [n for n in self._repairs.bad if n not in self._repairs.due]
        if not waiting:
            return
        held = self.world.held_nodes()
        for node in waiting:
            if node not in held:
                self._repairs.due[node] = now + self.options.faults.repair

    def _repair(self, now: Seconds) -> None:
        for node, at in list(self._repairs.due.items()):
            if at > now:
                continue
            self.world.repair(node, now)
            self.executor.restore_node(node)
            del self._repairs.due[node]
            del self._repairs.bad[node]

    def _active(self) -> int:
        return self.world.active()

    # -- reading back ------------------------------------------------------------------------------------------
    def _result(self, wall: float, decide_s: float) -> SimResult:
        start = self.options.start
        attempts = self.executor.attempts
        back = self.world.read_back()
        runs = [
            RunRecord(
                job_id=r.job_id,
                attempt=r.attempt,
                start=r.started_at - start,
                end=None if r.ended_at is None else r.ended_at - start,
                gpus=sum(g for _, g in r.placement),
                nodes=tuple(n for n, _ in r.placement),
                run_class=r.run_class,
                preempt_reason=r.preempt_reason,
                lost_work=attempts[(r.job_id, r.attempt)].lost_work if (r.job_id, r.attempt) in attempts else 0,
            )
            for r in back.runs
        ]
        states = back.states
        balances: dict[str, int] = {}
        for e in back.entries:
            if e.kind != EntryKind.CARRYOVER.value:
                balances[f"{e.budget}@{e.period_id}"] = balances.get(f"{e.budget}@{e.period_id}", 0) + e.amount
        exhausted = _exhaustion(back.entries, start)
        burn = _burn(back.entries, start)
        first: dict[str, Seconds] = {}
        last_end: dict[str, Seconds] = {}
        for r in runs:
            first.setdefault(r.job_id, r.start)
            if r.end is not None:
                last_end[r.job_id] = r.end
        jobs = [
            JobRecord(
                id=j.id,
                budget=j.budget,
                user=j.user,
                cls=j.cls,
                gpus=j.total_gpus,
                submit=j.submit,
                first_start=first.get(j.id),
                end=last_end.get(j.id) if states.get(j.id) not in ACTIVE else None,
                state=states.get(j.id, "not-submitted"),
                work=j.work,
                deadline=j.deadline,
                first_eta=None if j.id not in self.watch.first_eta else self.watch.first_eta[j.id] - start,
                own_limit=j.id in self.watch.own_limit,
                contract=j.contract.value,
            )
            for j in self.workload.jobs
        ]
        cfg = self.built.config
        leaves = cfg.leaves()
        return SimResult(
            name=self.workload.name,
            policy=self.label,
            seed=self.options.seed,
            duration=self.clock.now() - start,
            fleet_gpus=sum(cfg.gpus_by_type().values()),
            allocations={b.name: int(b.allocation * 1_000_000) for b in leaves},
            jobs=tuple(jobs),
            runs=tuple(runs),
            drains=tuple(d for d in self.drains),
            balances=balances,
            exhausted=exhausted,
            cycles=self.cycles,
            events=self.events,
            wall_seconds=wall,
            decide_seconds=decide_s,
            notes=self.workload.notes,
            burn=burn,
            idle=tuple(self.idle.samples),
            limits={b.name: lim for b in leaves if (lim := cfg.gpu_limit(b.name)) is not None},
            group_limits=_group_limits(cfg),
        )


def _group_limits(cfg: AllotmentConfig) -> dict[str, tuple[tuple[str, ...], int]]:
    """Budget with a GPU limit and more than one leaf below it → (those leaves, its limit) (SimResult.group_limits)."""
    leaves = cfg.leaves()
    out: dict[str, tuple[tuple[str, ...], int]] = {}
    for b in cfg.budgets:
        below = tuple(leaf.name for leaf in leaves if b.name in cfg.ancestors(leaf.name))
        if b.max_gpus is not None and len(below) > 1:
            out[b.name] = (below, b.max_gpus)
    return out


def _exhaustion(entries: Iterable[LedgerLine], start: Seconds) -> dict[str, Seconds]:
    """Leaf budget → seconds from the start when its balance in a period first fell to zero or below."""
    running: dict[tuple[str, str], int] = {}
    out: dict[str, Seconds] = {}
    for e in sorted(entries, key=lambda e: e.at):  # stable: posting order within an instant
        if e.kind == EntryKind.CARRYOVER.value:
            continue
        key = (e.budget, e.period_id)
        before = running.get(key)
        running[key] = (before or 0) + e.amount
        if before is not None and before > 0 >= running[key] and e.budget not in out and e.budget != INFRASTRUCTURE:
            out[e.budget] = e.at - start
    return out


def _burn(entries: Iterable[LedgerLine], start: Seconds) -> dict[str, tuple[tuple[Seconds, int], ...]]:
    """Leaf budget → its balance in the first period after each instant it changed (seconds from the start)."""
    lines = [e for e in entries if e.kind != EntryKind.CARRYOVER.value and e.budget != INFRASTRUCTURE]
    if not lines:
        return {}
    first = min(lines, key=lambda e: e.at).period_id
    balance: dict[str, int] = {}
    points: dict[str, list[tuple[Seconds, int]]] = {}
    for e in sorted((e for e in lines if e.period_id == first), key=lambda e: e.at):
        balance[e.budget] = balance.get(e.budget, 0) + e.amount
        series = points.setdefault(e.budget, [])
        t = e.at - start
        if series and series[-1][0] == t:
            series[-1] = (t, balance[e.budget])
        else:
            series.append((t, balance[e.budget]))
    return {b: tuple(p) for b, p in points.items()}
