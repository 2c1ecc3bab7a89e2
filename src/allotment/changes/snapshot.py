"""How a store's facts become the core's Snapshot: the rules every store shares when it loads one.

Owns: which active jobs a snapshot holds (a pending job whose run has not ended yet is left out, a pending job whose
cancellation was asked is left out and named for changes.decisions.cancelled_pending, a pending job the eligibility
gate keeps out, held, waiting for its dependency or a task past its array's `%N`, is left out with the reason it
waits, and one whose dependency can never be satisfied is left out and named for changes.decisions.never_satisfied:
changes.eligibility, for which it counts each limited array's active and waiting tasks and hands over the facts the
store's `lookup` reads for the jobs the dependencies name), a running job built
from its open run (and built again only when one of that run's columns changed: SnapshotCache), each account's
balance less what its open runs have accrued but not yet posted (`unposted`), a job as submitted read again when an
update raised its revision (service.jobedit), and the snapshot's job order (by id, whatever order a database
returned them in). A store reads rows (SQL, store/snapshot.py) or its own structures
(store/memory) into the plain facts below and calls `assemble`.

Must not: read anything itself, or price anything (allotment.core.units does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from allotment.changes.eligibility import (
    NO_FACTS,
    ArrayLoad,
    Candidate,
    DependencyFacts,
    Unsatisfiable,
    array_throttle,
    screen,
    wanted,
)
from allotment.core.decisions import WaitReason
from allotment.core.jobstate import JobState
from allotment.core.model import (
    Account,
    Allocation,
    Budget,
    CapacityWindow,
    Cluster,
    Job,
    Micro,
    Node,
    PolicyConfig,
    Preemption,
    Reservation,
    Run,
    RunClass,
    Seconds,
    Snapshot,
)
from allotment.core.units import charge_between
from allotment.ledger.entries import INFRASTRUCTURE

PENDING = JobState.PENDING.value

RunColumns = tuple[
    Seconds,
    str,
    Seconds | None,
    Seconds | None,
    Seconds | None,
    str | None,
    str | None,
    Seconds | None,
    str | None,
    Seconds | None,
    Seconds | None,
    int,
]
"""An open run's columns a running job is built from, in this order: started_at, run_class, slice_end, signalled_at,
kill_at, preempt_reason, preemptor, idle_since, backfill_for, checkpoint_at, checkpoint_every, attempt (its placement,
which never changes, apart)."""


@dataclass(frozen=True, slots=True)
class OpenRunRow:
    """An open run as a snapshot needs it: its job, placement (as the store keeps it), meter and columns."""

    job_id: str
    placement: object
    rate: Micro
    price: int
    price_since: Seconds
    charged_until: Seconds
    columns: RunColumns


@dataclass(slots=True)
class SnapshotCache:
    """What `assemble` keeps between one cycle and the next (each store owns one)."""

    jobs: dict[str, Job] = field(default_factory=dict)
    """Jobs as submitted, by id: what a job asks for never changes after submission."""
    running: dict[str, tuple[tuple[object, ...], Job]] = field(default_factory=dict)
    """Each running job as last built, with the columns of its open run it was built from (its attempt among them):
    it is built again only when one of those changed (a run's placement never does)."""
    cancelled_pending: list[str] = field(default_factory=list)
    """The pending jobs whose cancellation was asked, as the last load saw them (left out of the snapshot)."""
    gated: dict[str, WaitReason] = field(default_factory=dict)
    """The pending jobs the eligibility gate kept out of the last snapshot, with why each waits."""
    revisions: dict[str, int] = field(default_factory=dict)
    """The revision each job in `jobs` was read at (a job updated since is read again)."""
    unsatisfiable: dict[str, str] = field(default_factory=dict)
    """The pending jobs whose dependency can never be satisfied, as the last load saw them, with the reason (left
    out of the snapshot; the cycle cancels them)."""


ArrayTask = tuple[str, int, int]
"""A task of an array with a limit: (array id, index, the array's `%N`)."""
ActiveRow = tuple[str, str, bool, str | None, int, bool, ArrayTask | None, str | None]
"""An active job as a snapshot needs it: (job id, state, cancellation asked, hold or None, revision, requeue of its
current run asked, ArrayTask or None, dependency or None)."""
Lookup = Callable[[list[str], list[str]], DependencyFacts]
"""The store's read for the dependencies of waiting jobs: (ids of the jobs named, ids of the jobs with a singleton
dependency) → their facts (changes.eligibility.DependencyFacts)."""


def unposted(rate: Micro, price: int, price_since: Seconds, charged_until: Seconds, now: Seconds) -> Micro:
    """What an open run has accrued since it was last charged (not yet in the ledger)."""
    if now <= charged_until:
        return 0
    return charge_between(1, rate, price, price_since, charged_until, now)


def _array_loads(
    active: Sequence[ActiveRow], runs: Mapping[str, OpenRunRow], cache: Mapping[str, Job]
) -> dict[str, ArrayLoad]:
    """Each limited array's active tasks (holding GPUs: not pending, or a run not ended yet), for the eligibility
    gate's `%N` rule; `assemble` adds the waiting ones the gate's other rules let through."""
    loads: dict[str, ArrayLoad] = {}
    for jid, state, _, _, _, _, task, _ in active:
        if task is None:
            continue
        load = loads.get(task[0])
        if load is None:
            load = loads[task[0]] = ArrayLoad(task[2], cache[jid].total_gpus)
        if state != PENDING or jid in runs:
            load.active += 1
    return loads


def _screened(
    rows: Sequence[ActiveRow],
    runs: Mapping[str, OpenRunRow],
    cache: Mapping[str, Job],
    asked: Sequence[str],
    lookup: Lookup | None,
) -> dict[str, WaitReason | Unsatisfiable]:
    """The eligibility gate's verdicts on the pending jobs with a hold or a dependency (changes.eligibility)."""
    candidates = [
        Candidate(cache[a[0]], a[3], a[7])
        for a in rows
        if a[1] == PENDING and not a[2] and a[0] not in runs and (a[3] is not None or a[7] is not None)
    ]
    if not candidates:
        return {}
    named, singletons = wanted(candidates)
    facts = NO_FACTS
    if named or singletons:
        if lookup is None:
            raise ValueError("pending jobs have dependencies: the store must pass `lookup`")
        facts = lookup(named, singletons)
    return screen(candidates, facts, asked)


def run_of(placement: tuple[Allocation, ...], columns: RunColumns) -> Run:
    started, run_class, slice_end, signalled, kill_at, reason, preemptor, idle_since, backfill_for, saved, every, _ = (
        columns
    )
    preemption = None
    if signalled is not None:
        preemption = Preemption(signalled, kill_at if kill_at is not None else signalled, reason or "", preemptor)
    return Run(placement, started, RunClass(run_class), slice_end, preemption, idle_since, backfill_for, saved, every)


def assemble(
    now: Seconds,
    policy: PolicyConfig,
    rates: Mapping[str, Micro],
    *,
    clusters: tuple[Cluster, ...],
    nodes: tuple[Node, ...],
    budgets: Iterable[Budget],
    money: Mapping[str, Micro],
    usage: Mapping[str, float],
    open_runs: Iterable[OpenRunRow],
    active: Sequence[ActiveRow],
    fill: Callable[[list[str], dict[str, Job]], None],
    placement_of: Callable[[object], tuple[Allocation, ...]],
    windows: tuple[CapacityWindow, ...],
    reservations: tuple[Reservation, ...],
    keep: SnapshotCache,
    lookup: Lookup | None = None,
) -> Snapshot:
    """The snapshot as of `now` from a store's facts. `active`: (job id, state, cancellation asked, hold, revision,
    requeue of the open run asked, array task, dependency) of every job in an active state; `fill(ids, cache)` puts
    in `cache` the jobs as submitted (or as last updated) that it does not hold yet or holds at an older revision;
    `money`: each budget's own balance in the period; `usage`: each budget's usage decayed to `now`; `lookup` reads
    the facts of the jobs waiting jobs depend on (called only when some pending job has a dependency). `keep` is
    updated: the running jobs as built now, the pending jobs whose cancellation was asked, those the gate kept out
    or found unsatisfiable, and the submitted jobs still active."""
    cache = keep.jobs
    runs: dict[str, OpenRunRow] = {}
    accrued: dict[str, Micro] = {}
    for r in open_runs:
        runs[r.job_id] = r
        accrued[r.job_id] = unposted(r.rate, r.price, r.price_since, r.charged_until, now)
    seen = keep.revisions
    stale = [a for a in active if a[0] not in cache or seen.get(a[0], 0) != a[4]]
    if stale:
        fill([a[0] for a in stale], cache)
        seen.update((a[0], a[4]) for a in stale if a[4])  # revision 0, as submitted, is what a missing entry means
    owed: dict[str, Micro] = {}
    jobs: list[Job] = []
    running: dict[str, tuple[tuple[object, ...], Job]] = {}
    rows = sorted(active)  # by id: the order a database returns rows in is no rule
    asked = [a[0] for a in rows if a[1] == PENDING and a[2] and a[0] not in runs]
    verdicts = _screened(rows, runs, cache, asked, lookup)
    gated: dict[str, WaitReason] = {}
    doomed: dict[str, str] = {}
    loads = _array_loads(active, runs, cache)
    for jid, state, cancel, _, _, requeue, task, _ in rows:
        run = runs.get(jid)
        if state == PENDING and (run is not None or cancel):
            continue  # a run that has not ended yet (reconciled elsewhere), or a cancelled job (`asked`)
        if state != PENDING and run is None:
            continue
        job = cache[jid]
        if run is None:
            kept_out = verdicts.get(jid) if verdicts else None
            if isinstance(kept_out, Unsatisfiable):
                doomed[jid] = kept_out.reason  # a cancellation the change-set rules make (changes.decisions)
                continue
            if kept_out is not None:
                gated[jid] = kept_out
                continue
            if task is not None:  # a candidate for its array's `%N` (array_throttle, below)
                loads[task[0]].waiting.append((task[1], jid))
        if run is not None:
            owed[job.budget] = owed.get(job.budget, 0) + accrued[jid]
            built = keep.running.get(jid)
            key = (*run.columns, cancel, requeue)
            if built is None or built[0] != key:
                run_now = run_of(placement_of(run.placement), run.columns)
                built = (key, replace(job, run=run_now, cancel_requested=cancel, requeue_requested=requeue))
            running[jid] = built
            job = built[1]
        jobs.append(job)
    throttled = array_throttle(loads.items())
    if throttled:
        jobs = [j for j in jobs if j.id not in throttled]
        gated.update(throttled)
    keep.running = running  # runs that ended are forgotten
    keep.cancelled_pending = asked  # cancellations the change-set rules end (allotment.changes.decisions)
    keep.gated = gated
    keep.unsatisfiable = doomed
    if len(cache) > 2 * len(active) + 1000:  # forget finished jobs
        live = {a[0] for a in active}
        for jid in [j for j in cache if j not in live]:
            del cache[jid]
            seen.pop(jid, None)
    shown = tuple(b for b in budgets if b.name != INFRASTRUCTURE)
    accounts = {b.name: Account(money.get(b.name, 0) - owed.get(b.name, 0), usage.get(b.name, 0.0)) for b in shown}
    return Snapshot(
        clusters=clusters,
        nodes=nodes,
        rates=dict(rates),
        budgets=shown,
        accounts=accounts,
        jobs=tuple(jobs),
        windows=windows,
        reservations=reservations,
        policy=policy,
    )
