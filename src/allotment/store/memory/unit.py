"""The in-memory store's unit of work: the engine's loads over MemoryState, and persisting a ChangeSet into it.

Owns: MemoryCycle (allotment.changes.unit.CycleUnit on Python structures) — each load answers what the SQL unit's
query answers (store/scheduling.py), and `persist` writes each part of a change set as store/persist.py writes rows
— and posting ledger entries exactly once by idempotency key, refusing a closed period as the SQL store does.

Must not: compute what anything means (allotment.changes does: the snapshot's rules are changes.snapshot.assemble,
the opening of a period ledger.periods.period_opening), price anything, or commit (the store's transaction does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from allotment.changes.eligibility import DependencyFacts, Named, Namesake, array_named
from allotment.changes.intents import encode
from allotment.changes.records import ChangeSet, JobFacts, OpenRun, Rules
from allotment.changes.snapshot import ArrayTask, OpenRunRow, SnapshotCache, assemble
from allotment.changes.steps import ReasonValues
from allotment.core.decisions import WaitReason
from allotment.core.jobstate import ACTIVE, JobState
from allotment.core.model import Allocation, Job, Micro, Reservation, RunClass, Seconds, Snapshot
from allotment.ledger.entries import Entry, EntryKind, run_id
from allotment.ledger.periods import Period, period_at, period_opening
from allotment.ledger.usage import decayed
from allotment.ports.executor import ArrayPosition
from allotment.store.errors import ClosedPeriodError, NoOpenPeriodError
from allotment.store.memory.tables import EventRec, IntentRec, JobRec, Journal, MemoryState, PeriodRec, RunRec

_ACTIVE_VALUES = frozenset(s.value for s in ACTIVE)
_RUN_CLASSES = {c.value: c for c in RunClass}


def views(s: MemoryState, r: RunRec) -> tuple[OpenRun, OpenRunRow]:
    """A run's OpenRun (store/metering.open_run_of for a row) and its snapshot row, built once per change of it."""
    if r.views is None:
        run = OpenRun(
            r.id,
            r.job_id,
            r.attempt,
            s.jobs[r.job_id].job.budget,
            r.started_at,
            _RUN_CLASSES[r.run_class],
            r.rate,
            r.price,
            r.price_since,
            r.charged_until,
            r.signalled_at is not None,
            r.preempt_reason,
            r.requeue,
            r.confirmed_at is not None,
            r.checkpoint_at,
        )
        row = OpenRunRow(
            r.job_id,
            r.placement,
            r.rate,
            r.price,
            r.price_since,
            r.charged_until,
            (
                r.started_at,
                r.run_class,
                r.slice_end,
                r.signalled_at,
                r.kill_at,
                r.preempt_reason,
                r.preemptor,
                r.idle_since,
                r.backfill_for,
                r.checkpoint_at,
                r.checkpoint_every,
                r.attempt,
            ),
        )
        r.views = (run, row)
    return r.views


def open_run(s: MemoryState, r: RunRec) -> OpenRun:
    return views(s, r)[0]


def forget_views(s: MemoryState) -> None:
    """After a rollback: every run's views may show undone columns."""
    for r in s.runs.values():
        r.views = None


def facts(s: MemoryState, job_id: str) -> JobFacts:
    rec = s.jobs[job_id]
    j, spec = rec.job, rec.spec
    return JobFacts(
        job_id, JobState(rec.state), j.budget, j.user, rec.kind, j.grace, rec.attempt, j.requeue,
        rec.cancel_requested_at is not None, tuple(spec.get("command", ())), dict(spec.get("env") or {}),
        spec.get("workdir"), spec.get("image"), j.gpus, j.cpus, j.memory, ArrayPosition.of(spec.get("array")),
    )  # fmt: skip


def _array_task(rec: JobRec) -> ArrayTask | None:
    """The jobs table's array columns as the snapshot loader takes them (changes.snapshot.ActiveRow)."""
    if rec.array_limit is None or rec.array_id is None or rec.array_index is None:
        return None
    return (rec.array_id, rec.array_index, rec.array_limit)


def post(s: MemoryState, entry: Entry) -> bool:
    """Record `entry` unless an entry with its key exists (store/accounts.post). Returns whether it was new."""
    rec = s.periods.get(entry.period_id)
    if rec is None:
        raise NoOpenPeriodError(f"period {entry.period_id} does not exist")
    if entry.key in s.keys:
        return False
    if rec.closed:
        raise ClosedPeriodError(f"period {entry.period_id} is closed; cannot post {entry.key}")
    j = s.journal
    j.put(s.keys, entry.key, len(s.entries))
    j.append(s.entries, entry)
    if entry.run_id is not None:
        if entry.run_id not in s.by_run:
            j.put(s.by_run, entry.run_id, [])
        j.append(s.by_run[entry.run_id], entry)
    key = (entry.period_id, entry.budget)
    j.put(s.balances, key, s.balances.get(key, 0) + entry.amount)
    return True


def charged_for(s: MemoryState, run_id: str) -> Micro | None:
    """Everything the run's owner was charged for it (positive), None when it was never charged."""
    entries = s.by_run.get(run_id)
    run = s.runs.get(run_id)
    if not entries or run is None:
        return None
    owner = s.jobs[run.job_id].job.budget
    found = [e.amount for e in entries if e.kind is EntryKind.CHARGE and e.budget == owner]
    return -sum(found) if found else None


class MemoryCycle:
    """The unit of work of one in-memory transaction (allotment.changes.unit.CycleUnit)."""

    def __init__(
        self, state: MemoryState, now: Seconds, rules: Rules, reasons: dict[str, ReasonValues], keep: SnapshotCache
    ) -> None:
        self.s = state
        self.now = now
        self._rules = rules
        self._reasons = reasons
        self._keep = keep
        self._snapped = False

    @property
    def rules(self) -> Rules:
        return self._rules

    @property
    def reason_memo(self) -> MutableMapping[str, ReasonValues]:
        return self._reasons

    def state(self, key: str) -> object:
        return self.s.engine.get(key)

    def period(self, period_id: str) -> tuple[Period, bool] | None:
        rec = self.s.periods.get(period_id)
        return None if rec is None else (rec.period, rec.closed)

    def open_period(self, at: Seconds) -> Period:
        """store/accounts.open_period: the period holding `at` created, the one before closed, and the entries
        opening it posted (each once)."""
        s, acc = self.s, self._rules.accounting
        period = period_at(acc.period, at)
        rec = s.periods.get(period.id)
        if rec is None:
            s.journal.put(s.periods, period.id, PeriodRec(period))
        elif (rec.period.start, rec.period.end) != (period.start, period.end):
            raise ValueError(f"period {period.id} exists with other bounds; the period calendar changed")
        earlier = [r for r in s.periods.values() if r.period.start < period.start]
        closing: dict[str, Micro] = {}
        if earlier:
            previous = max(earlier, key=lambda r: r.period.start)
            closing = {b: v for (p, b), v in s.balances.items() if p == previous.period.id}
            s.journal.set(previous, "closed", True)
        budgets = sorted(s.budgets.values(), key=lambda b: b.name)
        for entry in period_opening(period, budgets, closing, acc.rollover):
            post(s, entry)
        return period

    def open_meters(self) -> list[OpenRun]:
        s = self.s
        return [open_run(s, s.open_runs[rid]) for rid in sorted(s.open_runs)]

    def usage(self) -> Mapping[str, tuple[float, Seconds]]:
        return dict(self.s.usage)

    def snapshot(self, period_id: str) -> Snapshot:
        s, now, p = self.s, self.now, self._rules
        half_life = p.policy.usage_half_life

        def fill(ids: list[str], cache: dict[str, Job]) -> None:
            for jid in ids:
                cache[jid] = s.jobs[jid].job

        open_rows = [views(s, r)[1] for r in s.open_runs.values()]
        snap = assemble(
            now,
            p.policy,
            p.rates,
            clusters=tuple(s.clusters.values()),
            nodes=tuple(s.nodes[n] for n in sorted(s.nodes)),
            budgets=sorted(s.budgets.values(), key=lambda b: b.name),
            money={b: v for (pid, b), v in s.balances.items() if pid == period_id},
            usage={b: decayed(u, as_of, now, half_life) for b, (u, as_of) in s.usage.items()},
            open_runs=open_rows,
            active=[
                (
                    jid,
                    rec.state,
                    rec.cancel_requested_at is not None,
                    rec.hold,
                    rec.revision,
                    rec.requeue_attempt == rec.attempt,
                    _array_task(rec),
                    rec.dependency,
                )
                for jid, rec in s.active.items()
            ],
            fill=fill,
            placement_of=_placement,
            windows=tuple(w for w in s.windows.values() if w.end > now),
            reservations=s.reservations,
            keep=self._keep,
            lookup=self._dependency_facts,
        )
        self._snapped = True
        return snap

    def _dependency_facts(self, named: list[str], singletons: list[str]) -> DependencyFacts:
        """store/snapshot.dependency_facts over the records."""
        s = self.s
        found = {jid: Named(JobState(s.jobs[jid].state), s.jobs[jid].attempt > 0) for jid in named if jid in s.jobs}
        arrays = {jid for jid in named if jid not in found}  # not a job: an array's id, perhaps
        if arrays:
            tasks: dict[str, list[Named]] = {}
            for rec in s.jobs.values():
                if rec.array_id in arrays:
                    tasks.setdefault(rec.array_id, []).append(Named(JobState(rec.state), rec.attempt > 0))
            found.update((array_id, array_named(ts)) for array_id, ts in tasks.items())
        namesakes: dict[str, list[Namesake]] = {}
        for jid in singletons:
            me = s.jobs[jid]
            namesakes[jid] = [
                Namesake(other_id, JobState(other.state), other.job.submitted_at)
                for other_id, other in s.active.items()
                if other.job.user == me.job.user and other.name == me.name
            ]
        return DependencyFacts(found, namesakes)

    def jobs(self, ids: Iterable[str]) -> dict[str, JobFacts]:
        s = self.s
        return {jid: facts(s, jid) for jid in sorted(set(ids)) if jid in s.jobs}

    def cancelled_pending(self) -> list[JobFacts]:
        s = self.s
        if self._snapped:
            return [facts(s, jid) for jid in self._keep.cancelled_pending]
        pending = JobState.PENDING.value
        return [
            facts(s, jid)
            for jid in sorted(s.active)
            if s.active[jid].state == pending and s.active[jid].cancel_requested_at is not None
        ]

    def gated(self) -> Mapping[str, WaitReason]:
        return self._keep.gated if self._snapped else {}

    def unsatisfiable(self) -> Mapping[str, str]:
        return self._keep.unsatisfiable if self._snapped else {}

    def runs_of(self, keys: Iterable[tuple[str, int]], lock: bool) -> dict[tuple[str, int], OpenRun]:
        s = self.s
        found: dict[tuple[str, int], OpenRun] = {}
        for job_id, attempt in set(keys):
            run = s.open_runs.get(run_id(job_id, attempt))
            if run is not None:
                found[(job_id, attempt)] = open_run(s, run)
        return found

    def charged(self, run_ids: Iterable[str]) -> dict[str, Micro]:
        out: dict[str, Micro] = {}
        for rid in set(run_ids):
            total = charged_for(self.s, rid)
            if total is not None:
                out[rid] = total
        return out

    def persist(self, changes: ChangeSet) -> None:
        persist(self.s, changes, self.now)


def _placement(raw: object) -> tuple[Allocation, ...]:
    assert isinstance(raw, tuple)
    return raw


def persist(s: MemoryState, changes: ChangeSet, now: Seconds) -> None:
    """Write `changes` into `s` in the open transaction, part by part in store/persist.py's order."""
    j, c = s.journal, changes
    for r in c.opened:
        run = RunRec(
            r.run_id, r.job_id, r.attempt, r.started_at, r.placement, r.run_class.value, r.slice_end, r.rate,
            r.price, r.started_at, r.started_at, r.backfill_for,
        )  # fmt: skip
        j.put(s.runs, r.run_id, run)
        j.put(s.open_runs, r.run_id, run)
    for sig in c.signalled:
        _write(j, s.runs[sig.run_id], signalled_at=sig.at, kill_at=sig.kill_at, preempt_reason=sig.reason,
               preemptor=sig.preemptor, requeue=sig.requeue)  # fmt: skip
    for rid, m in c.meters.items():
        _write(j, s.runs[rid], price=m.price, price_since=m.price_since, charged_until=m.charged_until)
    for rid, rc in c.reclassed.items():
        _write(j, s.runs[rid], run_class=rc.value)
    for e in c.ended:
        _write(j, s.runs[e.run_id], ended_at=e.at, exit_code=e.exit_code, end_reason=e.reason)
        j.drop(s.open_runs, e.run_id)
    for t in c.touched:
        run = s.runs[t.run_id]
        if t.confirmed_at is not None:
            _write(j, run, confirmed_at=t.confirmed_at)
        if t.idle_since is not None or t.clear_idle:
            _write(j, run, idle_since=t.idle_since)
        if t.slice_end is not None:
            _write(j, run, slice_end=t.slice_end)
        if t.checkpoint_at is not None:
            _write(j, run, checkpoint_at=t.checkpoint_at, checkpoint_every=t.checkpoint_every)
    for tr in c.transitions:
        rec = s.jobs[tr.job_id]
        j.set(rec, "state", tr.to_state.value)
        j.set(rec, "state_reason", tr.why)
        j.set(rec, "updated_at", tr.at)
        if tr.attempt is not None:
            j.set(rec, "attempt", tr.attempt)
        if tr.to_state.value in _ACTIVE_VALUES:
            if tr.job_id not in s.active:
                j.put(s.active, tr.job_id, rec)
        else:
            j.drop(s.active, tr.job_id)
        j.append(s.events, EventRec(tr.job_id, tr.at, tr.from_state.value, tr.to_state.value, tr.why))
    for entry in c.entries:
        post(s, entry)
    for sl in c.slices:
        j.append(s.slices, (sl.run_id, sl.job_id, sl.start, sl.end, sl.kind))
    for intent in c.intents:
        kind, job_id, attempt, run_id, payload = encode(intent)
        n = s.next_intent  # ids follow this order: delivery order
        j.set(s, "next_intent", n + 1)
        rec_i = IntentRec(n, kind.value, job_id, attempt, run_id, payload, now)
        j.put(s.intents, n, rec_i)
        j.put(s.undelivered, n, rec_i)
    for reason in c.reasons:
        j.put(s.reasons, reason.job_id, reason)
    for job_id in c.reasons_gone:
        j.drop(s.reasons, job_id)
    if c.reservations is not None:
        j.set(s, "reservations", tuple(
            Reservation(r.job_id, r.nodes, r.planned_start, r.kind, r.since, r.gave_way) for r in c.reservations
        ))  # fmt: skip
    for u in c.usage:
        j.put(s.usage, u.budget, (u.usage, u.as_of))
    for name, setting in c.state.items():
        j.put(s.engine, name, setting)


def _write(j: Journal, run: RunRec, **columns: object) -> None:
    """Set a run's columns (journalled) and forget what was built from the old ones."""
    for name, value in columns.items():
        j.set(run, name, value)
    run.views = None
