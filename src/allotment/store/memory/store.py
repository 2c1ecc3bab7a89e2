"""The in-memory implementation of the engine's Store port, for simulations: the same change sets, no database.

Owns: MemorySchedulingStore — `transaction(now)` yields a MemoryCycle (unit.py) and commits its journal when the
block ends, or undoes it when the block raises — the intent outbox, the reconciliation reads, and the writes a
simulation makes outside the engine as the API and the operator would: seeding the fleet and budget tree from a
configuration, submissions (a job's columns, or an array's tasks', from store/jobs.job_rows, as the SQL path inserts
them), cancellation requests and node states.

Must not: hold a scheduling, ledger or metering rule (allotment.changes, allotment.ledger and changes.snapshot do,
for both stores alike), or be used where state must survive the process (it keeps nothing on disk).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

from allotment.changes.intents import decode
from allotment.changes.records import Accounting, Rules
from allotment.changes.snapshot import SnapshotCache
from allotment.changes.steps import ReasonValues
from allotment.core.jobstate import ACTIVE, JobState
from allotment.core.model import Budget, CapacityWindow, Cluster, Micro, Node, NodeState, PolicyConfig, Seconds
from allotment.ledger.entries import INFRASTRUCTURE
from allotment.ports.store import CycleReport, Intent
from allotment.store.jobs import Submission, job_rows
from allotment.store.memory.tables import EventRec, JobRec, MemoryState
from allotment.store.memory.unit import MemoryCycle, forget_views
from allotment.store.snapshot import JOB_COLUMNS, job_of


class MemorySchedulingStore:
    """The Store port on MemoryState. One process, one thread: a transaction is the journal between `begin` and
    `commit`; the SQL store's row locks have nothing to guard here."""

    def __init__(
        self, policy: PolicyConfig, rates: Mapping[str, Micro], accounting: Accounting, state: MemoryState | None = None
    ) -> None:
        self.state = state or MemoryState()
        self.rules = Rules(policy, dict(rates), accounting)
        self._reasons: dict[str, ReasonValues] = {}
        self._snapshot_cache = SnapshotCache()
        self.state.journal.on_rollback.append(lambda: forget_views(self.state))

    @property
    def policy(self) -> PolicyConfig:
        return self.rules.policy

    @contextmanager
    def transaction(self, now: Seconds, *, cycle: bool = False) -> Iterator[MemoryCycle]:
        """One transaction as a unit of work: committed when the block ends, undone when it raises."""
        with self._writing():
            yield MemoryCycle(self.state, now, self.rules, self._reasons, self._snapshot_cache)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        journal = self.state.journal
        journal.begin()
        try:
            yield
        except BaseException:
            journal.rollback()
            raise
        journal.commit()

    def cycled(self, report: CycleReport) -> None:
        """Told after each committed cycle (this store keeps nothing of it)."""

    # -- outbox and reconciliation -----------------------------------------------------------------------------
    def undelivered(self) -> list[Intent]:
        return [decode(r.id, r.kind, r.job_id, r.attempt, r.payload) for r in self.state.undelivered.values()]

    def mark_delivered(self, ids: Sequence[int], at: Seconds) -> None:
        s = self.state
        with self._writing():
            for i in ids:
                if i in s.intents:
                    s.journal.drop(s.undelivered, i)
                    s.journal.put(s.delivered_at, i, at)

    def open_runs(self) -> Mapping[str, int]:
        return {r.job_id: r.attempt for r in self.state.open_runs.values()}

    def next_deadline(self, now: Seconds) -> Seconds | None:
        found = [
            t for r in self.state.open_runs.values() for t in (r.slice_end, r.kill_at) if t is not None and t > now
        ]
        return min(found) if found else None

    # -- what the API and the operator write -------------------------------------------------------------------
    def seed(
        self,
        *,
        clusters: Iterable[Cluster] = (),
        nodes: Iterable[Node] = (),
        budgets: Iterable[Budget] = (),
        windows: Iterable[CapacityWindow] = (),
    ) -> None:
        """store/fleet.seed_from for the scheduling tables: clusters, nodes (a node already known keeps its state),
        budgets with the infrastructure account, windows."""
        s = self.state
        with self._writing():
            for c in clusters:
                s.journal.put(s.clusters, c.name, c)
            for n in nodes:
                known = s.nodes.get(n.name)
                kept = n if known is None else replace(n, state=known.state, forced=known.forced)
                s.journal.put(s.nodes, n.name, kept)
            listed = list(budgets)
            if all(b.name != INFRASTRUCTURE for b in listed):
                listed.append(Budget(INFRASTRUCTURE, None, 0))
            for b in listed:
                s.journal.put(s.budgets, b.name, b)
            for w in windows:
                s.journal.put(s.windows, w.id, w)

    def submit(self, subs: Sequence[Submission], now: Seconds) -> list[tuple[str, bool]]:
        """store/jobs.submit_many: each submission a pending job with its first history record; a request id seen
        before returns the job it created and False."""
        s = self.state
        out: list[tuple[str, bool]] = []
        with self._writing():
            for sub in subs:
                known = s.requests.get(sub.request_id) if sub.request_id is not None else None
                if known is not None:
                    out.append((known, False))
                    continue
                rows = job_rows(sub, now)
                for v in rows:
                    if v["id"] in s.jobs:
                        raise ValueError(f"job {v['id']} exists")
                    rec = JobRec(
                        job_of(tuple(v[c] for c in JOB_COLUMNS)), v["name"], v["kind"], v["spec"], v["state"],
                        v["state_reason"], v["updated_at"], v["attempt"], v["cancel_requested_at"], v["request_id"],
                        v["hold"], array_id=v["array_id"], array_index=v["array_index"],
                        array_limit=v["array_limit"], dependency=v["dependency"],
                    )  # fmt: skip
                    s.journal.put(s.jobs, rec.job.id, rec)
                    s.journal.put(s.active, rec.job.id, rec)
                    s.journal.append(s.events, EventRec(rec.job.id, now, None, JobState.PENDING.value, "submitted"))
                first = rows[0]["id"]
                if sub.request_id is not None:
                    s.journal.put(s.requests, sub.request_id, first)
                out.append((first, True))
        return out

    def request_cancel(self, job_id: str, now: Seconds) -> bool:
        """store/jobs.request_cancel: mark a cancellation of an active job (twice is harmless). False: no such job."""
        s = self.state
        rec = s.jobs.get(job_id)
        if rec is None:
            return False
        if rec.cancel_requested_at is None and JobState(rec.state) in ACTIVE:
            with self._writing():
                s.journal.set(rec, "cancel_requested_at", now)
        return True

    def set_node(self, name: str, state: NodeState, reason: str | None) -> None:
        s = self.state
        with self._writing():
            s.journal.put(s.nodes, name, replace(s.nodes[name], state=state))
            s.journal.put(s.node_reasons, name, reason)
