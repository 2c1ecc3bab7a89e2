"""The cycle's outcome so far: the decisions made, and the tallies they change, kept consistent with each other.

Owns: Outcome — the starts, preemptions, renewals, lapses and reservations decided so far; the started, preempted
and reserved job sets; per budget the GPUs held (for limits) and the money promised to granted slices; sessions
per user; what each started job holds; backfill; wake_at; and what the pending steps learned about waiting jobs
(blockers, jobs passed over unchecked, jobs denied room, budgets that have a plan or tried preemption). It changes
only through the named mark methods below, so that a start always moves `started`, `held`, `committed` and the
session count together (Kueue's workload entry with named mark methods is the model).

Must not: decide anything, or change fair share or windows (CycleState.start does, beside its mark). The one
change it makes outside itself: Outcome.preempt marks the victim's occupants leaving in the Capacity it is given,
so that a preemption is never recorded without its GPUs being counted as leaving.
"""

from __future__ import annotations

from collections.abc import Iterable

from allotment.core.capacity import Capacity
from allotment.core.decisions import Blocker, Lapse, Preempt, PreemptReason, Renew, Reserve, Start
from allotment.core.indices import Indices
from allotment.core.model import Job, Micro, Seconds

StartedTerms = tuple[Seconds | None, int, Micro]
"""What a job started in this cycle holds: (slice end, GPUs held, rate of its pool)."""


class Outcome:
    """What the cycle has decided so far (see the module docstring)."""

    __slots__ = (
        "backfill_of",
        "blockers",
        "committed",
        "held",
        "lapses",
        "planned_budgets",
        "preempt_tried",
        "preempted",
        "preempts",
        "renews",
        "reserved",
        "reserves",
        "room_denied",
        "sessions_of",
        "started",
        "started_terms",
        "starts",
        "unchecked",
        "wake_at",
    )

    def __init__(self) -> None:
        self.starts: list[Start] = []
        self.preempts: list[Preempt] = []
        self.renews: list[Renew] = []
        self.lapses: list[Lapse] = []
        self.reserves: list[Reserve] = []
        self.started: set[str] = set()
        self.preempted: set[str] = set()
        self.reserved: set[str] = set()
        self.held: dict[str, int] = {}
        """GPUs held per budget, its descendants' included (limits)."""
        self.committed: dict[str, Micro] = {}
        """Money promised to granted slices, per leaf budget."""
        self.sessions_of: dict[str, int] = {}
        """Sessions per user."""
        self.started_terms: dict[str, StartedTerms] = {}
        self.backfill_of: dict[str, str] = {}
        """Jobs started in this cycle on nodes another job's plan claims: the plan's job."""
        self.wake_at: Seconds | None = None
        """Decisions.wake_at: the earliest instant a deferred call to leave falls due."""
        self.blockers: dict[str, Blocker] = {}
        self.unchecked: set[str] = set()
        """Jobs passed over on the fast path (nothing could fit them): their funds and limits are checked only
        when their reason is explained."""
        self.room_denied: set[str] = set()
        """Jobs that got no planned start because plans there already leave only the session room unclaimed."""
        self.planned_budgets: set[str] = set()
        """Budgets that hold a planned start (one each)."""
        self.preempt_tried: set[str] = set()
        """Budgets whose preemption search ran (once per budget and cycle)."""

    # -- reads --------------------------------------------------------------------------------------------------
    def available(self, ix: Indices, budget: str) -> Micro:
        """The budget's balance less what its granted slices have been promised."""
        return ix.balance(budget) - self.committed.get(budget, 0)

    def is_open(self, job_id: str) -> bool:
        """Not started, reserved or blocked yet: a later step may still serve it."""
        return job_id not in self.started and job_id not in self.reserved and job_id not in self.blockers

    # -- tallies ------------------------------------------------------------------------------------------------
    def hold(self, chain: Iterable[str], gpus: int) -> None:
        """`gpus` more GPUs held by each budget of `chain` (a budget and its ancestors)."""
        held = self.held
        for name in chain:
            held[name] = held.get(name, 0) + gpus

    def commit(self, budget: str, amount: Micro) -> None:
        self.committed[budget] = self.committed.get(budget, 0) + amount

    def open_session(self, user: str) -> None:
        self.sessions_of[user] = self.sessions_of.get(user, 0) + 1

    def admit(self, job: Job, chain: Iterable[str], gpus: int, promised: Micro | None, session: bool) -> None:
        """The job now holds `gpus` GPUs (started, or GPUs reserved for it by preemption): count them against its
        budgets' limits, its slice's price (`promised`, None without a slice) against its budget's money, and one
        more session of its user when it is one."""
        self.hold(chain, gpus)
        if promised is not None:
            self.commit(job.budget, promised)
        if session:
            self.open_session(job.user)

    # -- marks --------------------------------------------------------------------------------------------------
    def mark_started(self, start: Start, terms: StartedTerms) -> None:
        self.starts.append(start)
        if start.backfill_for is not None:
            self.backfill_of[start.job_id] = start.backfill_for
        self.started_terms[start.job_id] = terms
        self.started.add(start.job_id)

    def preempt(
        self, ix: Indices, cap: Capacity, job: Job, reason: PreemptReason, preemptor: str | None, requeue: bool | None
    ) -> None:
        """Tell running work to leave (once per cycle): its occupants in `cap` are leaving after its grace."""
        if job.id in self.preempted:
            return
        now = ix.now
        grace = 0 if reason is PreemptReason.NODE_DOWN else ix.grace(job)
        again = job.requeue if requeue is None else requeue
        self.preempts.append(Preempt(job.id, reason, grace, again, preemptor))
        self.preempted.add(job.id)
        for occ in cap.occupants_of.get(job.id, ()):
            cap.update_occupant(occ, leaving=True, preemptible=False, leave=now + grace)

    def mark_renewed(self, renew: Renew, budget: str, promised: Micro) -> None:
        self.renews.append(renew)
        self.commit(budget, promised)

    def mark_lapsed(self, lapse: Lapse) -> None:
        self.lapses.append(lapse)

    def mark_reserved(self, reserve: Reserve) -> None:
        self.reserves.append(reserve)
        self.reserved.add(reserve.job_id)

    def block(self, job_id: str, blocker: Blocker) -> None:
        """The job waits this cycle, for this reason."""
        self.blockers[job_id] = blocker

    def unblock(self, job_id: str) -> None:
        """A later step serves a job an earlier one found waiting (rule `gang-backfill-on-claimed-nodes`)."""
        self.blockers.pop(job_id, None)
        self.unchecked.discard(job_id)

    def pass_over(self, job_id: str) -> None:
        """The job waits for capacity, found on the fast path: its funds and limits are left for explain()."""
        self.blockers[job_id] = Blocker.CAPACITY
        self.unchecked.add(job_id)

    def deny_room(self, job_id: str) -> None:
        self.room_denied.add(job_id)

    def plan_for(self, budget: str) -> None:
        self.planned_budgets.add(budget)

    def tried_preemption(self, budget: str) -> None:
        self.preempt_tried.add(budget)

    def wake_by(self, at: Seconds) -> None:
        """Decide again by `at` at the latest."""
        if self.wake_at is None or at < self.wake_at:
            self.wake_at = at
