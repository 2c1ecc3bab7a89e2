"""The unit of work a store offers the engine: one transaction's loads, and `persist(changes)`.

Owns: the CycleUnit Protocol — what the engine's steps may read inside one transaction (the period state, the open
runs' meters, usage, the snapshot, the facts of the jobs and runs that decisions and events name, the charged
totals a refund needs) and the one way they write (a ChangeSet). It lives here, not in allotment.ports, because it
speaks change sets and the ports sit below them; ports/store.SchedulingStore yields it from `transaction(now)`.

Must not: implement anything (allotment.store does on SQLite and PostgreSQL; issue 20 adds an in-memory one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Protocol

from allotment.changes.records import ChangeSet, JobFacts, OpenRun, Rules
from allotment.changes.steps import ReasonValues
from allotment.core.decisions import WaitReason
from allotment.core.model import Micro, Seconds, Snapshot
from allotment.ledger.periods import Period


class CycleUnit(Protocol):
    """One transaction: everything read and persisted through it commits together or not at all."""

    @property
    def rules(self) -> Rules:
        """The settings the change-set rules run under (the store was configured with them)."""
        ...

    @property
    def reason_memo(self) -> MutableMapping[str, ReasonValues]:
        """What pending reasons the store last wrote (kept by the store between transactions)."""
        ...

    def state(self, key: str) -> object:
        """An engine key ("period", "usage_at", ...), None when never set."""
        ...

    def period(self, period_id: str) -> tuple[Period, bool] | None:
        """A period and whether it is closed; None when unknown."""
        ...

    def open_period(self, at: Seconds) -> Period:
        """Open and fund the period holding `at`, closing the one before (entries by allotment.ledger.periods)."""
        ...

    def open_meters(self) -> list[OpenRun]:
        """Every open run with its meter and signal."""
        ...

    def usage(self) -> Mapping[str, tuple[float, Seconds]]:
        """Budget → (recorded fair-share usage, as of)."""
        ...

    def snapshot(self, period_id: str) -> Snapshot:
        """The scheduling snapshot as of the transaction's `now` (what was persisted so far included)."""
        ...

    def jobs(self, ids: Iterable[str]) -> dict[str, JobFacts]: ...

    def cancelled_pending(self) -> list[JobFacts]:
        """Pending jobs whose cancellation was asked."""
        ...

    def gated(self) -> Mapping[str, WaitReason]:
        """The pending jobs the eligibility gate kept out of this transaction's snapshot, with why each waits (empty
        before `snapshot`)."""
        ...

    def unsatisfiable(self) -> Mapping[str, str]:
        """The pending jobs whose dependency the eligibility gate found can never be satisfied in this transaction's
        snapshot, with the reason (empty before `snapshot`): the cycle cancels them."""
        ...

    def runs_of(self, keys: Iterable[tuple[str, int]], lock: bool) -> dict[tuple[str, int], OpenRun]:
        """The open runs of these (job, attempt) pairs; with `lock`, under row locks (they are about to end)."""
        ...

    def charged(self, run_ids: Iterable[str]) -> dict[str, Micro]:
        """Run id → everything its owner was charged for it (positive)."""
        ...

    def persist(self, changes: ChangeSet) -> None:
        """Write `changes` in this transaction."""
        ...
