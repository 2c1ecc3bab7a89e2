"""Reading the scheduling snapshot out of the database for one cycle.

Owns: turning rows (fleet, budgets, balances less what open runs have accrued but not yet posted, decayed usage,
active jobs with their current runs and whether their cancellation was asked, windows, reservations) into the
core's immutable Snapshot, with plain Core selects (no ORM objects on this hot path).

Must not: write anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.orm import Session

from allotment.core.jobstate import ACTIVE_ORDERED, JobState
from allotment.core.model import (
    Account,
    Allocation,
    Budget,
    CapacityWindow,
    Cluster,
    ContractClass,
    Job,
    JobKind,
    Micro,
    Node,
    NodeState,
    PolicyConfig,
    Preemption,
    Reservation,
    ReservationKind,
    Run,
    RunClass,
    Seconds,
    Snapshot,
)
from allotment.core.units import charge_between
from allotment.ledger.entries import INFRASTRUCTURE
from allotment.store.accounts import balances
from allotment.store.db import in_batches
from allotment.store.metering import usages
from allotment.store.tables import (
    BudgetRow,
    ClusterRow,
    JobRow,
    NodeRow,
    ReservationRow,
    RunRow,
    WindowRow,
)

ACTIVE_STATES: tuple[str, ...] = tuple(s.value for s in ACTIVE_ORDERED)
PENDING = JobState.PENDING.value


@dataclass(slots=True)
class SnapshotCache:
    """What load_snapshot keeps between one cycle and the next (the store owns one)."""

    jobs: dict[str, Job] = field(default_factory=dict)
    """Jobs as submitted, by id: what a job asks for never changes after submission."""
    running: dict[str, tuple[tuple[object, ...], Job]] = field(default_factory=dict)
    cancelled_pending: list[str] = field(default_factory=list)
    """The pending jobs whose cancellation was asked, as the last load saw them (left out of the snapshot)."""
    """Each running job as last built, with the columns of its open run it was built from (its attempt among them):
    it is built again only when one of those changed (a run's placement never does)."""


def placement_of(raw: Any) -> tuple[Allocation, ...]:
    return tuple(Allocation(str(a["node"]), tuple(int(g) for g in a["gpus"])) for a in raw)


def unposted(rate: Micro, price: int, price_since: Seconds, charged_until: Seconds, now: Seconds) -> Micro:
    """What an open run has accrued since it was last charged (not yet in the ledger)."""
    if now <= charged_until:
        return 0
    return charge_between(1, rate, price, price_since, charged_until, now)


def _fill_cache(conn: Connection, ids: list[str], cache: dict[str, Job]) -> None:
    """Read the jobs not seen before (what a job asks for never changes after submission)."""
    for batch in in_batches(ids):
        for row in conn.execute(_JOBS_ASKED, {"ids": batch}):
            (
                jid,
                budget,
                user,
                gpus,
                replicas,
                kind,
                contract,
                slice_s,
                prio,
                grace,
                max_rt,
                submitted,
                types,
                clusters_,
                fallback,
                requeue,
            ) = row
            cache[jid] = Job(
                jid,
                budget,
                user,
                gpus,
                replicas,
                JobKind(kind),
                ContractClass(contract),
                slice_s,
                prio,
                grace,
                max_rt,
                submitted,
                tuple(types),
                tuple(clusters_),
                bool(fallback),
                bool(requeue),
            )


# The cycle's reads, each built once: a statement built afresh costs more Python time than SQLite takes to run it
# (construction, then its compiled-cache key on every call; decision 39).
_JOBS_ASKED = select(
    JobRow.id,
    JobRow.budget,
    JobRow.user,
    JobRow.gpus,
    JobRow.replicas,
    JobRow.kind,
    JobRow.contract,
    JobRow.slice_seconds,
    JobRow.priority,
    JobRow.grace,
    JobRow.max_runtime,
    JobRow.submitted_at,
    JobRow.gpu_types,
    JobRow.clusters,
    JobRow.fallback_opportunistic,
    JobRow.requeue,
).where(JobRow.id.in_(bindparam("ids", expanding=True)))
_CLUSTERS = select(ClusterRow.name, ClusterRow.topology)
_NODES = select(
    NodeRow.name,
    NodeRow.cluster,
    NodeRow.gpu_type,
    NodeRow.gpus,
    NodeRow.labels,
    NodeRow.state,
    NodeRow.forced,
).order_by(NodeRow.name)
_BUDGETS = select(BudgetRow.name, BudgetRow.parent, BudgetRow.allocation_micro, BudgetRow.max_gpus).order_by(
    BudgetRow.name
)
_ACTIVE = select(JobRow.id, JobRow.state, JobRow.cancel_requested_at).where(JobRow.state.in_(ACTIVE_STATES))
_WINDOWS = select(
    WindowRow.id,
    WindowRow.budget,
    WindowRow.cluster,
    WindowRow.gpu_type,
    WindowRow.gpus,
    WindowRow.start,
    WindowRow.end,
).where(WindowRow.end > bindparam("now"))
_RESERVATIONS = select(
    ReservationRow.job_id,
    ReservationRow.nodes,
    ReservationRow.planned_start,
    ReservationRow.kind,
    ReservationRow.since,
    ReservationRow.gave_way,
)


RUN_COLUMNS = (
    RunRow.started_at,
    RunRow.run_class,
    RunRow.slice_end,
    RunRow.signalled_at,
    RunRow.kill_at,
    RunRow.preempt_reason,
    RunRow.preemptor,
    RunRow.idle_since,
    RunRow.backfill_for,
    RunRow.attempt,
)
"""The columns of an open run a running job is built from (with its placement, which never changes)."""
_OPEN_RUNS = select(
    RunRow.job_id,
    RunRow.placement,
    RunRow.rate_micro,
    RunRow.price,
    RunRow.price_since,
    RunRow.charged_until,
    *RUN_COLUMNS,
).where(RunRow.ended_at.is_(None))


def _run(placement: Any, columns: tuple[Any, ...]) -> Run:
    started, run_class, slice_end, signalled, kill_at, reason, preemptor, idle_since, backfill_for, _ = columns
    preemption = None
    if signalled is not None:
        preemption = Preemption(signalled, kill_at if kill_at is not None else signalled, reason or "", preemptor)
    return Run(placement_of(placement), started, RunClass(run_class), slice_end, preemption, idle_since, backfill_for)


def load_snapshot(
    session: Session,
    now: Seconds,
    policy: PolicyConfig,
    rates: Mapping[str, Micro],
    period_id: str,
    keep: SnapshotCache | None = None,
) -> Snapshot:
    """The snapshot as of `now`. `keep` holds what is reused between cycles (the store passes its own): only jobs
    it has not seen are read in full, and only runs whose columns changed are built again."""
    keep = SnapshotCache() if keep is None else keep
    cache = keep.jobs
    session.flush()  # this transaction's changes so far (cancellations, usage) are part of what is read
    conn = session.connection()  # plain Core reads: no ORM row processing on this hot path
    clusters = tuple(Cluster(name, tuple(topology)) for name, topology in conn.execute(_CLUSTERS))
    nodes = tuple(
        Node(
            name,
            cluster,
            gpu_type,
            gpus,
            tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items())),
            NodeState(state),
            bool(forced),
        )
        for name, cluster, gpu_type, gpus, labels, state, forced in conn.execute(_NODES)
    )
    budgets = tuple(
        Budget(name, parent, allocation, max_gpus)
        for name, parent, allocation, max_gpus in conn.execute(_BUDGETS)
        if name != INFRASTRUCTURE
    )
    money = balances(session, period_id)
    usage = usages(session, now, policy.usage_half_life)

    runs: dict[str, tuple[tuple[object, ...], Any]] = {}
    """job id → (its open run's columns but the placement, the placement)"""
    owed: dict[str, Micro] = {}
    accrued: dict[str, Micro] = {}
    for row in conn.execute(_OPEN_RUNS):
        job_id, placement, rate, price, price_since, charged_until = row[:6]
        runs[job_id] = (tuple(row[6:]), placement)
        accrued[job_id] = unposted(rate, price, price_since, charged_until, now)

    jobs: list[Job] = []
    active = conn.execute(_ACTIVE).all()
    _fill_cache(conn, [jid for jid, _, _ in active if jid not in cache], cache)
    running: dict[str, tuple[tuple[object, ...], Job]] = {}
    asked: list[str] = []
    for jid, state, cancel in active:
        run = runs.get(jid)
        if state == PENDING and (run is not None or cancel is not None):
            if run is None:
                asked.append(jid)  # a cancellation the change-set rules end (allotment.changes.decisions)
            continue  # a run that has not ended yet (reconciled elsewhere), or a cancelled job
        if state != PENDING and run is None:
            continue
        job = cache[jid]
        if run is not None:
            owed[job.budget] = owed.get(job.budget, 0) + accrued[jid]
            built = keep.running.get(jid)
            key = (*run[0], cancel is not None)
            if built is None or built[0] != key:
                built = (key, replace(job, run=_run(run[1], run[0]), cancel_requested=cancel is not None))
            running[jid] = built
            job = built[1]
        jobs.append(job)
    keep.running = running  # runs that ended are forgotten
    keep.cancelled_pending = asked
    if len(cache) > 2 * len(active) + 1000:  # forget finished jobs
        live = {jid for jid, _, _ in active}
        for jid in [j for j in cache if j not in live]:
            del cache[jid]
    accounts = {b.name: Account(money.get(b.name, 0) - owed.get(b.name, 0), usage.get(b.name, 0.0)) for b in budgets}
    windows = tuple(
        CapacityWindow(wid, budget, cluster, gpu_type, gpus, start, end)
        for wid, budget, cluster, gpu_type, gpus, start, end in conn.execute(_WINDOWS, {"now": now})
    )
    reservations = tuple(
        Reservation(
            job_id,
            tuple((str(n), int(g)) for n, g in nodes_),
            planned,
            ReservationKind(kind),
            since,
            tuple(str(j) for j in gave_way or ()),
        )
        for job_id, nodes_, planned, kind, since, gave_way in conn.execute(_RESERVATIONS)
    )
    return Snapshot(
        clusters=clusters,
        nodes=nodes,
        rates=dict(rates),
        budgets=budgets,
        accounts=accounts,
        jobs=tuple(jobs),
        windows=windows,
        reservations=reservations,
        policy=policy,
    )
