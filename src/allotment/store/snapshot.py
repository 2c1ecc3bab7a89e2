"""Reading the scheduling snapshot out of the database for one cycle.

Owns: reading the rows a snapshot is made of (fleet, budgets, balances, decayed usage, active jobs with their open
runs, whether their cancellation was asked, their hold and dependency, windows, reservations, and for waiting jobs'
dependencies the states of the jobs they name and the active namesakes of singleton jobs: `dependency_facts`) with
plain Core selects (no ORM objects on this hot path), statements built once. What those facts mean — which jobs a
snapshot holds, balances less what open runs have accrued — is changes.snapshot.assemble, shared with the in-memory
store.

Must not: write anything, or decide what a row means for the snapshot (changes.snapshot does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.orm import Session

from allotment.changes.eligibility import DependencyFacts, Named, Namesake, array_named
from allotment.changes.snapshot import ActiveRow, OpenRunRow, SnapshotCache, assemble, unposted
from allotment.core.jobstate import ACTIVE_ORDERED, JobState
from allotment.core.model import (
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
    Reservation,
    ReservationKind,
    Seconds,
    Snapshot,
)
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

__all__ = ["JOB_COLUMNS", "SnapshotCache", "job_of", "load_snapshot", "placement_of", "unposted"]

ACTIVE_STATES: tuple[str, ...] = tuple(s.value for s in ACTIVE_ORDERED)


def placement_of(raw: Any) -> tuple[Allocation, ...]:
    return tuple(Allocation(str(a["node"]), tuple(int(g) for g in a["gpus"])) for a in raw)


def job_of(row: Any) -> Job:
    """A job as submitted, from its columns in _JOBS_ASKED's order (the in-memory store builds the same tuple)."""
    (jid, budget, user, gpus, replicas, kind, contract, slice_s, prio, grace, max_rt, submitted, types, clusters_,
     fallback, requeue, cpus, memory) = row  # fmt: skip
    return Job(
        jid, budget, user, gpus, replicas, JobKind(kind), ContractClass(contract), slice_s, prio, grace, max_rt,
        submitted, tuple(types), tuple(clusters_), bool(fallback), bool(requeue), cpus=cpus, memory=memory,
    )  # fmt: skip


JOB_COLUMNS = (
    "id", "budget", "user", "gpus", "replicas", "kind", "contract", "slice_seconds", "priority", "grace",
    "max_runtime", "submitted_at", "gpu_types", "clusters", "fallback_opportunistic", "requeue", "cpus",
    "memory_mib",
)  # fmt: skip
"""The jobs table's columns a job as submitted is built from, in job_of's order."""


def _fill_cache(conn: Connection, ids: list[str], cache: dict[str, Job]) -> None:
    """Read the jobs not seen before, or updated since they were read (what a job asks for changes only through an
    update, which raises its revision: changes.snapshot.assemble asks again then)."""
    for batch in in_batches(ids):
        for row in conn.execute(_JOBS_ASKED, {"ids": batch}):
            cache[row[0]] = job_of(row)


# The cycle's reads, each built once: a statement built afresh costs more Python time than SQLite takes to run it
# (construction, then its compiled-cache key on every call; decision 39).
_JOBS_ASKED = select(*(getattr(JobRow, c) for c in JOB_COLUMNS)).where(JobRow.id.in_(bindparam("ids", expanding=True)))
_CLUSTERS = select(ClusterRow.name, ClusterRow.topology)
_NODES = select(
    NodeRow.name,
    NodeRow.cluster,
    NodeRow.gpu_type,
    NodeRow.gpus,
    NodeRow.labels,
    NodeRow.state,
    NodeRow.forced,
    NodeRow.cpus,
    NodeRow.memory_mib,
).order_by(NodeRow.name)
_BUDGETS = select(BudgetRow.name, BudgetRow.parent, BudgetRow.allocation_micro, BudgetRow.max_gpus).order_by(
    BudgetRow.name
)
_ACTIVE = select(
    JobRow.id,
    JobRow.state,
    JobRow.cancel_requested_at,
    JobRow.hold,
    JobRow.revision,
    JobRow.requeue_attempt,
    JobRow.attempt,
    JobRow.array_id,
    JobRow.array_index,
    JobRow.array_limit,
    JobRow.dependency,
).where(JobRow.state.in_(ACTIVE_STATES))
_NAMED = select(JobRow.id, JobRow.state, JobRow.attempt).where(JobRow.id.in_(bindparam("ids", expanding=True)))
_ARRAY_TASKS = select(JobRow.array_id, JobRow.state, JobRow.attempt).where(
    JobRow.array_id.in_(bindparam("ids", expanding=True))
)
"""The tasks of the arrays a dependency names by array id (changes.eligibility.array_named)."""
_WHO = select(JobRow.id, JobRow.user, JobRow.name).where(JobRow.id.in_(bindparam("ids", expanding=True)))
_NAMESAKES = select(JobRow.id, JobRow.user, JobRow.name, JobRow.state, JobRow.submitted_at).where(
    JobRow.state.in_(ACTIVE_STATES), JobRow.name.in_(bindparam("names", expanding=True))
)
"""The active jobs of these names (matched to their users in Python: one scan of the active jobs by the state index,
not a lookup of every job of a user per singleton job, which cost 0.35 s a cycle for 200 of them at Ai2 scale)."""
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
    RunRow.checkpoint_at,
    RunRow.checkpoint_every,
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


def load_snapshot(
    session: Session,
    now: Seconds,
    policy: PolicyConfig,
    rates: Mapping[str, Micro],
    period_id: str,
    keep: SnapshotCache | None = None,
) -> Snapshot:
    """The snapshot as of `now` (changes.snapshot.assemble over this database's rows). `keep` holds what is reused
    between cycles (the store passes its own): only jobs it has not seen are read in full, and only runs whose
    columns changed are built again."""
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
            cpus=cpus,
            memory=memory,
        )
        for name, cluster, gpu_type, gpus, labels, state, forced, cpus, memory in conn.execute(_NODES)
    )
    budgets = [
        Budget(name, parent, allocation, max_gpus) for name, parent, allocation, max_gpus in conn.execute(_BUDGETS)
    ]
    open_runs = [OpenRunRow(r[0], r[1], r[2], r[3], r[4], r[5], tuple(r[6:])) for r in conn.execute(_OPEN_RUNS)]
    active: list[ActiveRow] = [
        (
            jid,
            state,
            cancel is not None,
            hold,
            rev,
            requeue == attempt,  # a requeue asked of the run open now
            None if limit is None else (array_id or "", index or 0, limit),
            dep,
        )
        for jid, state, cancel, hold, rev, requeue, attempt, array_id, index, limit, dep in conn.execute(_ACTIVE)
    ]
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
    return assemble(
        now,
        policy,
        rates,
        clusters=clusters,
        nodes=nodes,
        budgets=budgets,
        money=balances(session, period_id),
        usage=usages(session, now, policy.usage_half_life),
        open_runs=open_runs,  # the columns of RUN_COLUMNS, in order
        active=active,
        fill=lambda ids, cache: _fill_cache(conn, ids, cache),
        placement_of=placement_of,
        windows=windows,
        reservations=reservations,
        keep=SnapshotCache() if keep is None else keep,
        lookup=lambda named, singletons: dependency_facts(conn, named, singletons),
    )


def dependency_facts(conn: Connection, named: list[str], singletons: list[str]) -> DependencyFacts:
    """The facts the eligibility gate needs for waiting jobs' dependencies: the state of each job named (and whether
    it ever started; an array named by its id as its tasks together: changes.eligibility.array_named), and the
    active jobs of the same user and name as each job with a singleton dependency."""
    found: dict[str, Named] = {}
    for batch in in_batches(named):
        for jid, state, attempt in conn.execute(_NAMED, {"ids": batch}):
            found[jid] = Named(JobState(state), attempt > 0)
    arrays: dict[str, list[Named]] = {}
    for batch in in_batches([jid for jid in named if jid not in found]):  # not a job: an array's id, perhaps
        for array_id, state, attempt in conn.execute(_ARRAY_TASKS, {"ids": batch}):
            arrays.setdefault(str(array_id), []).append(Named(JobState(state), attempt > 0))
    found.update((array_id, array_named(tasks)) for array_id, tasks in arrays.items())
    namesakes: dict[str, list[Namesake]] = {}
    if singletons:
        who: dict[tuple[str, str], list[str]] = {}
        for batch in in_batches(singletons):
            for jid, user, name in conn.execute(_WHO, {"ids": batch}):
                who.setdefault((user, name), []).append(jid)
                namesakes[jid] = []
        for batch in in_batches(sorted({name for _, name in who})):
            for other, user, name, state, submitted_at in conn.execute(_NAMESAKES, {"names": batch}):
                for jid in who.get((user, name), ()):
                    namesakes[jid].append(Namesake(other, JobState(state), submitted_at))
    return DependencyFacts(found, namesakes)
