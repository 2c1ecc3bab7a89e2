"""Hypothesis strategies for the scheduling core's property tests: random but internally consistent snapshots.

Owns: random fleets (1–3 clusters of 1–8 eight-GPU nodes, H100/B200, some nodes cordoned, draining or down),
budget trees (depth 1–3, random allocations, balances and decayed usage, some budgets nearly exhausted, optional GPU
limits), workloads (pending batch jobs, multi-node gangs and sessions; running jobs placed on real free GPU indices
with slices ending before, at or after `now`, some already leaving, some idle sessions), optional capacity windows and
carried reservations, and a random `now`.

Every snapshot it draws is consistent: no GPU index is held twice, jobs belong to leaf budgets only, running gangs hold
whole nodes of one pool, slices end at most `max_slice` after `now`, kill deadlines lie within `max_grace` of `now`.

The shapes at the promises' edges (a window opening, money at a slice's cost) are drawn by
tests/core/strategies_edges.py.

Also owns the small read-only facts about a snapshot that several properties need (GPUs held, money already
promised, prices) and `CheckedDriver`, the test Driver with hooks that see every round.

Must not: assert anything; the property tests do that.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Decisions
from allotment.core.model import (
    FULL_PRICE,
    MICRO_PER_CREDIT,
    Account,
    Allocation,
    Budget,
    CapacityWindow,
    Cluster,
    ContractClass,
    Job,
    JobKind,
    Node,
    NodeState,
    PolicyConfig,
    Preemption,
    Reservation,
    ReservationKind,
    Run,
    RunClass,
    Snapshot,
)
from allotment.core.units import cost
from tests.core.driver import Driver

HOUR = 3600
GPU_TYPES = ("H100", "B200")
RATES = {"H100": MICRO_PER_CREDIT, "B200": 1_600_000}
EXACT_RATES = {"H100": 3_600_000, "B200": 5_760_000}
"""Rates at which every whole second costs a whole number of micro at every price used (1000, 400): charges of the
pieces of a run then add up exactly, whatever the charging granularity."""
# letter-only names, so that a number in a wait message comes from the numbers it reports, not from a name
LEAF_NAMES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
GROUP_NAMES = ("north", "south", "east")
ROOT = "org"

Draw = Callable[[st.SearchStrategy[Any]], Any]


@dataclass(frozen=True)
class Case:
    """A random snapshot and the instant to decide at, plus scripted durations for the Driver."""

    snapshot: Snapshot
    now: int
    durations: dict[str, int]

    def leaves(self) -> list[str]:
        parents = {b.parent for b in self.snapshot.budgets if b.parent is not None}
        return [b.name for b in self.snapshot.budgets if b.name not in parents]


@dataclass(frozen=True)
class Knobs:
    """What kind of world to draw."""

    trouble: bool = True
    """Some nodes cordoned, draining (sometimes forced) or down."""
    windows: bool = True
    reservations: bool = True
    sessions: bool = True
    scarce_funds: bool = True
    """Some budgets nearly exhausted or negative; otherwise every budget has plenty."""
    leaving: bool = True
    """Some running jobs already told to leave."""
    max_runtime: bool = True
    exact_rates: bool = False
    max_pending: int = 12
    max_running: int = 12
    min_clusters: int = 1
    max_clusters: int = 3
    max_nodes: int = 8
    headroom: tuple[int, ...] = (0, 0, 8)
    limits: bool = True
    """Some budgets have a GPU limit."""


# -- fleet ------------------------------------------------------------------------------------------------------------
def _fleet(draw: Draw, k: Knobs) -> tuple[list[Cluster], list[Node]]:
    clusters: list[Cluster] = []
    nodes: list[Node] = []
    for ci in range(draw(st.integers(k.min_clusters, k.max_clusters))):
        name = f"c{ci}"
        clusters.append(Cluster(name, ("rack",)))
        types = draw(st.sampled_from([("H100",), ("B200",), ("H100", "B200")]))
        rack_size = draw(st.integers(1, 4))
        for ni in range(draw(st.integers(1, k.max_nodes))):
            state = NodeState.READY
            forced = False
            if k.trouble:
                roll = draw(st.integers(0, 11))
                state = {0: NodeState.CORDONED, 1: NodeState.DRAINING, 2: NodeState.DOWN}.get(roll, NodeState.READY)
                forced = state is NodeState.DRAINING and draw(st.booleans())
            gtype = types[ni % len(types)]
            labels = (("rack", f"{name}-r{ni // rack_size}"),)
            nodes.append(Node(f"{name}-n{ni:02d}", name, gtype, 8, labels, state, forced))
    return clusters, nodes


# -- organisation -----------------------------------------------------------------------------------------------------
def _budgets(draw: Draw, k: Knobs) -> tuple[list[Budget], dict[str, Account]]:
    depth = draw(st.integers(1, 3))
    budgets: list[Budget] = []
    leaf_names = iter(LEAF_NAMES)

    def limit() -> int | None:
        if not k.limits:
            return None
        return draw(st.integers(8, 64)) if draw(st.integers(0, 5)) == 0 else None

    def alloc() -> int:
        credits: int = draw(st.integers(50, 5000))
        return credits * MICRO_PER_CREDIT

    leaves: list[Budget] = []
    if depth == 1:
        leaves = [Budget(next(leaf_names), None, alloc(), limit()) for _ in range(draw(st.integers(1, 4)))]
    else:
        budgets.append(Budget(ROOT, None, alloc(), limit()))
        parents = [ROOT]
        if depth == 3:
            parents = list(GROUP_NAMES[: draw(st.integers(1, 3))])
            budgets.extend(Budget(g, ROOT, alloc(), limit()) for g in parents)
        for p in parents:
            leaves.extend(Budget(next(leaf_names), p, alloc(), limit()) for _ in range(draw(st.integers(1, 3))))
    budgets.extend(leaves)
    accounts: dict[str, Account] = {}
    for b in budgets:
        mode = draw(st.integers(0, 9)) if k.scarce_funds else 0
        if mode <= 4:
            balance = b.allocation
        elif mode <= 6:
            balance = draw(st.integers(0, b.allocation))
        elif mode <= 8:
            balance = draw(st.integers(0, 40 * MICRO_PER_CREDIT))  # nearly exhausted
        else:
            balance = -draw(st.integers(0, 20 * MICRO_PER_CREDIT))  # overdrawn by opportunistic work
        usage = draw(st.floats(0, 5000, allow_nan=False, allow_infinity=False))
        accounts[b.name] = Account(balance, usage)
    return budgets, accounts


# -- running work -----------------------------------------------------------------------------------------------------
def _running(
    draw: Draw,
    k: Knobs,
    nodes: list[Node],
    leaves: list[str],
    pol: PolicyConfig,
    now: int,
    used: dict[str, set[int]],
) -> list[Job]:
    jobs: list[Job] = []
    by_pool: dict[tuple[str, str], list[Node]] = {}
    for n in nodes:
        by_pool.setdefault((n.cluster, n.gpu_type), []).append(n)
    pools = sorted(by_pool)
    for i in range(draw(st.integers(0, k.max_running))):
        budget = draw(st.sampled_from(leaves))
        pool = draw(st.sampled_from(pools))
        kinds = [JobKind.BATCH, JobKind.SESSION] if k.sessions else [JobKind.BATCH]
        kind = draw(st.sampled_from(kinds))
        empty = [n for n in by_pool[pool] if not used[n.name]]
        want_gang = kind is JobKind.BATCH and len(empty) >= 2 and draw(st.integers(0, 3)) == 0
        if want_gang:
            chosen = draw(st.lists(st.sampled_from(empty), min_size=2, max_size=min(4, len(empty)), unique=True))
            placement = tuple(Allocation(n.name, tuple(range(8))) for n in chosen)
            gpus, replicas = 8, len(chosen)
        else:
            roomy = [n for n in by_pool[pool] if len(used[n.name]) < n.gpus]
            if not roomy:
                continue
            node = draw(st.sampled_from(roomy))
            free = [g for g in range(node.gpus) if g not in used[node.name]]
            taken = sorted(draw(st.lists(st.sampled_from(free), min_size=1, max_size=len(free), unique=True)))
            placement = (Allocation(node.name, tuple(taken)),)
            gpus, replicas = len(taken), 1
        for a in placement:
            used[a.node].update(a.gpus)
        started = now - draw(st.integers(0, 20 * HOUR))
        grace = draw(st.sampled_from([0, 10, 30, 60, 300, 600, 900]))
        contract = ContractClass.GUARANTEED
        fallback = False
        idle_since: int | None = None
        slice_seconds = draw(st.integers(1800, 8 * HOUR))
        if kind is JobKind.SESSION:
            length = draw(st.integers(600, pol.session_max_length))
            started = now - draw(st.integers(0, length + HOUR))
            run_class, slice_end, slice_seconds = RunClass.SESSION, started + length, length
            if draw(st.booleans()):
                idle_since = now - draw(st.integers(0, 2 * HOUR))
        else:
            mode = draw(st.sampled_from(["in-slice", "in-slice", "at-now", "ended", "lapsed", "fallback", "opp"]))
            if mode == "in-slice":
                run_class, slice_end = RunClass.GUARANTEED, now + draw(st.integers(1, pol.max_slice))
            elif mode == "at-now":
                run_class, slice_end = RunClass.GUARANTEED, now
            elif mode == "ended":
                run_class, slice_end = RunClass.GUARANTEED, now - draw(st.integers(1, 2 * HOUR))
            elif mode in ("lapsed", "fallback"):  # a run that lost its slice has none (model.Run)
                run_class, slice_end = RunClass.OPPORTUNISTIC, None
                fallback = mode == "fallback" or draw(st.booleans())
            else:
                run_class, slice_end, contract = RunClass.OPPORTUNISTIC, None, ContractClass.OPPORTUNISTIC
            if slice_end is not None:
                started = min(started, slice_end - 1)
        preemption = None
        if k.leaving and draw(st.integers(0, 5)) == 0:
            left = draw(st.integers(0, min(grace, pol.max_grace)))
            preemption = Preemption(now - (min(grace, pol.max_grace) - left), now + left, "fair-share")
        max_runtime = None
        if k.max_runtime and draw(st.integers(0, 7)) == 0:
            max_runtime = draw(st.integers(HOUR, 30 * HOUR))
        run = Run(placement, started, run_class, slice_end, preemption, idle_since)
        jobs.append(
            Job(
                f"run{i:02d}",
                budget,
                f"{budget}-u{draw(st.integers(0, 2))}",
                gpus,
                replicas=replicas,
                kind=kind,
                contract=contract,
                slice_seconds=slice_seconds,
                priority=draw(st.integers(-5, 5)),
                grace=grace,
                max_runtime=max_runtime,
                submitted_at=started - draw(st.integers(0, HOUR)),
                fallback_opportunistic=fallback,
                run=run,
            )
        )
    return jobs


# -- pending work -----------------------------------------------------------------------------------------------------
def _pending(draw: Draw, k: Knobs, clusters: list[Cluster], leaves: list[str], now: int) -> list[Job]:
    jobs: list[Job] = []
    cluster_names = [c.name for c in clusters]
    for i in range(draw(st.integers(0, k.max_pending))):
        budget = draw(st.sampled_from(leaves))
        kind = JobKind.SESSION if k.sessions and draw(st.integers(0, 4)) == 0 else JobKind.BATCH
        if kind is JobKind.SESSION:
            gpus, replicas = draw(st.sampled_from([1, 2, 4, 8, 8, 16])), 1
            slice_seconds = draw(st.sampled_from([1800, 2 * HOUR, 4 * HOUR, 8 * HOUR, 10 * HOUR]))
            contract = ContractClass.GUARANTEED
        else:
            if draw(st.integers(0, 3)) == 0:
                gpus, replicas = 8, draw(st.integers(2, 4))
            else:
                gpus, replicas = draw(st.integers(1, 8)), 1
            slice_seconds = draw(st.sampled_from([600, 1800, HOUR, 4 * HOUR, 8 * HOUR, 12 * HOUR]))
            contract = draw(
                st.sampled_from([ContractClass.GUARANTEED, ContractClass.GUARANTEED, ContractClass.OPPORTUNISTIC])
            )
        gpu_types: tuple[str, ...] = draw(st.sampled_from([(), (), ("H100",), ("B200",), ("B200", "H100")]))
        allowed: tuple[str, ...] = ()
        if draw(st.integers(0, 3)) == 0:
            allowed = tuple(draw(st.lists(st.sampled_from(cluster_names), min_size=1, unique=True)))
        jobs.append(
            Job(
                f"job{i:02d}",
                budget,
                f"{budget}-u{draw(st.integers(0, 2))}",
                gpus,
                replicas=replicas,
                kind=kind,
                contract=contract,
                slice_seconds=slice_seconds,
                priority=draw(st.integers(-5, 5)),
                grace=draw(st.sampled_from([0, 10, 30, 60, 300, 600, 900])),
                submitted_at=now - draw(st.integers(0, 10 * HOUR)),
                gpu_types=gpu_types,
                clusters=allowed,
                fallback_opportunistic=contract is ContractClass.GUARANTEED and draw(st.booleans()),
            )
        )
    return jobs


# -- windows and reservations -----------------------------------------------------------------------------------------
def _windows(draw: Draw, nodes: list[Node], leaves: list[str], now: int) -> list[CapacityWindow]:
    capacity: dict[tuple[str, str], int] = {}
    for n in nodes:
        capacity[(n.cluster, n.gpu_type)] = capacity.get((n.cluster, n.gpu_type), 0) + n.gpus
    pools = sorted(capacity)
    out: list[CapacityWindow] = []
    for i in range(draw(st.integers(0, 2))):
        cluster, gtype = draw(st.sampled_from(pools))
        start = now + draw(st.integers(-4 * HOUR, 10 * HOUR))
        end = start + draw(st.integers(HOUR, 24 * HOUR))
        # the budgeting process never books a pool beyond its size at any instant
        booked = sum(
            w.gpus for w in out if (w.cluster, w.gpu_type) == (cluster, gtype) and w.start < end and start < w.end
        )
        if booked >= capacity[(cluster, gtype)]:
            continue
        gpus = draw(st.integers(1, capacity[(cluster, gtype)] - booked))
        out.append(CapacityWindow(f"w{i}", draw(st.sampled_from(leaves)), cluster, gtype, gpus, start, end))
    return out


def _reservations(draw: Draw, nodes: list[Node], pending: list[Job], now: int) -> list[Reservation]:
    out: list[Reservation] = []
    taken: set[str] = set()
    batch = [j for j in pending if j.kind is JobKind.BATCH]
    for job in draw(st.lists(st.sampled_from(batch), max_size=3, unique_by=lambda j: j.id)) if batch else []:
        fits = [
            n
            for n in nodes
            if n.name not in taken
            and (not job.gpu_types or n.gpu_type in job.gpu_types)
            and (not job.clusters or n.cluster in job.clusters)
        ]
        if not fits:
            continue
        first = draw(st.sampled_from(fits))
        same = [n for n in fits if (n.cluster, n.gpu_type) == (first.cluster, first.gpu_type)]
        if job.replicas > 1:
            if len(same) < job.replicas:
                continue
            chosen = draw(st.lists(st.sampled_from(same), min_size=job.replicas, max_size=job.replicas, unique=True))
            spec = tuple((n.name, 8) for n in chosen)
        else:
            chosen = [first]
            spec = ((first.name, job.total_gpus),)
        taken.update(n.name for n in chosen)
        kind = draw(st.sampled_from([ReservationKind.PLANNED, ReservationKind.PREEMPTION]))
        out.append(Reservation(job.id, spec, now + draw(st.integers(0, 4 * HOUR)), kind))
    return out


@st.composite
def cases(draw: Draw, knobs: Knobs = Knobs()) -> Case:
    """A consistent random snapshot, `now`, and a scripted duration for some of its jobs."""
    now = draw(st.integers(100_000, 1_000_000))
    pol = PolicyConfig(
        default_headroom=draw(st.sampled_from(knobs.headroom)),
        session_max_per_user=draw(st.integers(1, 2)),
    )
    clusters, nodes = _fleet(draw, knobs)
    budgets, accounts = _budgets(draw, knobs)
    parents = {b.parent for b in budgets if b.parent is not None}
    leaves = [b.name for b in budgets if b.name not in parents]
    used: dict[str, set[int]] = {n.name: set() for n in nodes}
    running = _running(draw, knobs, nodes, leaves, pol, now, used)
    pending = _pending(draw, knobs, clusters, leaves, now)
    windows = _windows(draw, nodes, leaves, now) if knobs.windows and draw(st.booleans()) else []
    reservations = _reservations(draw, nodes, pending, now) if knobs.reservations and draw(st.booleans()) else []
    jobs = running + pending
    durations = {
        j.id: (now - j.run.started_at if j.run is not None else 0) + draw(st.integers(60, 12 * HOUR))
        for j in jobs
        if draw(st.booleans())
    }
    snap = Snapshot(
        clusters=tuple(clusters),
        nodes=tuple(nodes),
        rates=dict(EXACT_RATES if knobs.exact_rates else RATES),
        budgets=tuple(budgets),
        accounts=accounts,
        jobs=tuple(draw(st.permutations(jobs))),
        windows=tuple(windows),
        reservations=tuple(reservations),
        policy=pol,
    )
    return Case(snap, now, durations)


def with_jobs(case: Case, jobs: list[Job]) -> Case:
    return replace(case, snapshot=replace(case.snapshot, jobs=tuple(jobs)))


CALM = Knobs(
    trouble=False,
    windows=False,
    reservations=False,
    scarce_funds=False,
    leaving=False,
    max_runtime=False,
    limits=False,
)
"""Worlds for multi-round properties: ready nodes, ample funds, no carried state."""


# -- read-only facts about a snapshot and a decision, shared by the properties ---------------------------------------
def decide(case: Case) -> Decisions:
    return AllotmentPolicy().decide(case.snapshot, case.now)


def node_map(snap: Snapshot) -> dict[str, Node]:
    return {n.name: n for n in snap.nodes}


def price_of(pol: PolicyConfig, run_class: RunClass) -> int:
    if run_class is RunClass.SESSION:
        return pol.session_price
    return pol.opportunistic_price if run_class is RunClass.OPPORTUNISTIC else FULL_PRICE


def rate_on(snap: Snapshot, placement: tuple[Allocation, ...]) -> int:
    return snap.rates[node_map(snap)[placement[0].node].gpu_type]


def held_gpus(snap: Snapshot) -> dict[str, set[int]]:
    """GPU indices held per node by running jobs (leaving ones included: their GPUs are not free yet)."""
    out: dict[str, set[int]] = {n.name: set() for n in snap.nodes}
    for job in snap.jobs:
        if job.run is not None:
            for a in job.run.placement:
                out.setdefault(a.node, set()).update(a.gpus)
    return out


def committed(snap: Snapshot, now: int) -> dict[str, int]:
    """Per budget, the cost of the remaining time of slices already running (not leaving)."""
    out: dict[str, int] = {}
    for job in snap.jobs:
        run = job.run
        if run is None or run.preemption is not None or not run.in_slice(now) or run.slice_end is None:
            continue
        price = snap.policy.session_price if job.kind is JobKind.SESSION else FULL_PRICE
        amount = cost(run.gpu_count, rate_on(snap, run.placement), price, run.slice_end - now)
        out[job.budget] = out.get(job.budget, 0) + amount
    return out


def slice_length(pol: PolicyConfig, job: Job) -> int:
    if job.kind is JobKind.SESSION:
        return max(1, job.slice_seconds)
    return max(pol.min_slice, min(job.slice_seconds, pol.max_slice))


def pools_of(snap: Snapshot, job: Job) -> list[tuple[str, str]]:
    """The pools (cluster, GPU type) the job allows that exist in the fleet."""
    pools = {(n.cluster, n.gpu_type) for n in snap.nodes}
    return sorted(
        p for p in pools if (not job.gpu_types or p[1] in job.gpu_types) and (not job.clusters or p[0] in job.clusters)
    )


def nodes_needed(job: Job, size: int = 8) -> int:
    if job.gpus > size:
        return 0
    return 1 if job.total_gpus <= size else -(-job.replicas // (size // job.gpus))


class CheckedDriver(Driver):
    """The test Driver, with hooks that see every snapshot and the decisions taken on it before they are applied."""

    def __init__(self, snapshot: Snapshot, durations: dict[str, int], now: int) -> None:
        super().__init__(snapshot, dict(durations), now=now)
        self.hooks: list[Callable[[Snapshot, int, Decisions], None]] = []
        self.rounds: list[tuple[int, Decisions]] = []

    def step(self, to: int | None = None) -> Decisions:
        if to is not None:
            self._advance(to)
        snap = self.current()
        d = self.policy.decide(snap, self.now)
        for hook in self.hooks:
            hook(snap, self.now, d)
        self.rounds.append((self.now, d))
        self.last = d
        self._apply(d)
        self._carry_tags(d)
        return d

    def _carry_tags(self, d: Decisions) -> None:
        """Carry what the engine stores with a start and a reservation (the plan a backfilled job was placed around,
        when a planned start was first made), which the plain Driver drops, and clear the slice end of a lapsed run
        as model.Run says (the plain Driver keeps it, so the core would take the run for slice-expired work)."""
        for s in d.starts:
            job = self.jobs.get(s.job_id)
            if job is not None and job.run is not None:
                self.jobs[s.job_id] = replace(job, run=replace(job.run, backfill_for=s.backfill_for))
        for lp in d.lapses:  # a run that lost its slice is opportunistic: slice_end None (model.Run)
            job = self.jobs.get(lp.job_id)
            if job is not None and job.run is not None:
                self.jobs[lp.job_id] = replace(job, run=replace(job.run, slice_end=None))
        self.reservations = {r.job_id: r.carried() for r in d.reserves}


EXAMPLES_SCALE = float(os.environ.get("ALLOT_TEST_EXAMPLES_SCALE", "1"))
"""Scales the example counts below: benchmarks/mutation.py runs each mutant with fewer (its --examples-scale)."""


def examples(n: int) -> int:
    return max(1, round(n * EXAMPLES_SCALE))


PROPERTY = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Single-cycle properties on random snapshots."""
DRIVEN = settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Multi-round properties with the Driver (each example runs many cycles)."""

ROOMY = Knobs(max_running=4)
"""Worlds with room to spare: whole free nodes, so gangs and long slices get placed."""
