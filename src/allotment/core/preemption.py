"""Preemption rules (docs/policy.md §5), each a named pure function, and victim selection.

Owns: which running work a preemptor may take and why (`opportunistic_yields`, `expired_yields_to_under_share`,
`session_takes`, `window_reclaims`, `reservation_claims`; `reasons_that_may_take` lists what they can give for a
run), the one in-slice guard every victim passes
(`victim_reason`, promise 1), the choice of victims on a node (fewest GPUs, then least lost progress), and the cost
of emptying a node for a gang.

The rules say why a preemptor may take work that may be taken at all; they do not repeat the guard. Every caller
that picks victims asks through `victim_reason` (here, in `running.due_victims` and in `pending.headroom_refill`),
so the guard is checked in one place and a change to it changes what every preemption may take.

Must not: emit decisions or change capacity; the cycle does that after checking that the preemptor can then start
(`never a preemption that does not let the preemptor start`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from allotment.core.capacity import NodeSlot, Occupant
from allotment.core.checkpoints import unsaved_work
from allotment.core.decisions import PreemptReason
from allotment.core.model import Job, Seconds

VictimTest = Callable[[Occupant], PreemptReason | None]


def never_inside_slice(occ: Occupant) -> bool:
    """Promise 1: a job inside its run slice, or already leaving, is never chosen as a victim."""
    return occ.preemptible


def victim_reason(occ: Occupant, rule: VictimTest) -> PreemptReason | None:
    """Why `rule` takes this occupant, or None: the one place the in-slice guard is applied to a victim rule."""
    return rule(occ) if never_inside_slice(occ) else None


def is_opportunistic_work(job: Job) -> bool:
    """Work that never held a slice in this run: opportunistic jobs and guaranteed jobs running on fallback."""
    return job.run is not None and job.run.slice_end is None


def is_slice_expired(job: Job, now: Seconds) -> bool:
    """Guaranteed work whose slice ended without renewal: it runs on, preemptible."""
    return job.run is not None and job.run.slice_end is not None and job.run.slice_end <= now


def opportunistic_yields(
    occ: Occupant, reason: PreemptReason, kept: frozenset[str] = frozenset()
) -> PreemptReason | None:
    """Opportunistic work yields to any guaranteed job that needs its GPUs, but for the work of budgets `kept` as not
    above their fair share (rule `opportunistic-entitlement`, state.kept_opportunistic): the share does not depend on
    the contract. Sessions take it by `session_takes`."""
    if is_opportunistic_work(occ.job) and occ.job.budget not in kept:
        return reason
    return None


def expired_yields_to_under_share(
    occ: Occupant,
    now: Seconds,
    preemptor_budget: str,
    preemptor_after: float,
    standing_after_loss: Callable[[Occupant], float],
) -> PreemptReason | None:
    """Slice-expired work is taken only when the preemptor's budget is below its fair share (checked by the caller
    before asking), the victim's budget stays at or above its own share after losing the job, and the preemptor
    stays below the victim after gaining — strict progress, so two budgets can never preempt each other in a loop."""
    if not is_slice_expired(occ.job, now):
        return None
    if occ.job.budget == preemptor_budget:
        return None
    after = standing_after_loss(occ)
    if after >= 1.0 and preemptor_after < after:
        return PreemptReason.FAIR_SHARE
    return None


def session_takes(occ: Occupant, now: Seconds) -> PreemptReason | None:
    """A session within the limits may take opportunistic or slice-expired work (promise 9)."""
    if is_opportunistic_work(occ.job) or is_slice_expired(occ.job, now):
        return PreemptReason.FOR_SESSION
    return None


def window_reclaims(occ: Occupant, window_budget: str) -> PreemptReason | None:
    """During a capacity window its budget reclaims the pool from any other budget's preemptible work."""
    if occ.job.budget != window_budget:
        return PreemptReason.WINDOW
    return None


def reservation_claims(occ: Occupant) -> PreemptReason | None:
    """A planned start takes the preemptible work on the GPUs it reserved, once it is due."""
    return PreemptReason.RESERVATION


def reasons_that_may_take(opportunistic: bool, slice_expired: bool) -> tuple[PreemptReason, ...]:
    """The reasons the rules above (and the session-room refill, `pending.headroom_refill`) can give for taking a
    running job once the in-slice guard lets it go: what `allot why` tells its owner could preempt it. Opportunistic
    work yields to guaranteed work and sessions; slice-expired work to a budget below its fair share and to sessions;
    either to a capacity window, a due reservation and the session room. Work inside its slice: none."""
    if opportunistic:
        return (
            PreemptReason.FOR_GUARANTEED,
            PreemptReason.FOR_SESSION,
            PreemptReason.WINDOW,
            PreemptReason.RESERVATION,
            PreemptReason.HEADROOM,
        )
    if slice_expired:
        return (
            PreemptReason.FAIR_SHARE,
            PreemptReason.FOR_SESSION,
            PreemptReason.WINDOW,
            PreemptReason.RESERVATION,
            PreemptReason.HEADROOM,
        )
    return ()


class Victims:
    """The work a preemption would take on one node (a plain class, not a dataclass: decision 44)."""

    __slots__ = ("gpus", "lost", "occupants", "ready_at", "reasons")

    def __init__(
        self,
        occupants: tuple[Occupant, ...],
        reasons: tuple[PreemptReason, ...],
        gpus: int,
        lost: int,
        ready_at: Seconds,
    ) -> None:
        self.occupants: Final = occupants
        self.reasons: Final = reasons
        self.gpus: Final = gpus
        self.lost: Final = lost
        """Seconds of work the victims lose (`lost_work`: since each one's last checkpoint, or its run's start)."""
        self.ready_at: Final = ready_at
        """When the GPUs will be free: the latest kill deadline among victims and leaving occupants counted."""

    @property
    def cost(self) -> tuple[int, int]:
        return (self.gpus, self.lost)


def fewest_victims(
    eligible: list[tuple[Occupant, PreemptReason]], deficit: int, now: Seconds
) -> list[tuple[Occupant, PreemptReason]]:
    """The victims among `eligible` (which free at least `deficit` GPUs together) to take: one large enough if any
    (the smallest, then the freshest), else the largest first (then the freshest) until they cover the deficit. None
    of those could be spared: the prefix less its last is short of the deficit, and each is at least as large as the
    last."""
    singles = sorted((o for o in eligible if o[0].gpus >= deficit), key=lambda o: _victim_key(o[0], now))
    if singles:
        return [singles[0]]
    chosen: list[tuple[Occupant, PreemptReason]] = []
    got = 0
    for cand in sorted(eligible, key=lambda o: (-o[0].gpus, lost_work(o[0], now), o[0].job.id)):
        chosen.append(cand)
        got += cand[0].gpus
        if got >= deficit:
            break
    return chosen


def victims_on_node(
    slot: NodeSlot, need: int, now: Seconds, test: VictimTest, grace: Callable[[Job], int]
) -> Victims | None:
    """The victims that free `need` GPUs on this node, counting free GPUs and work already leaving first, then
    preferring the fewest GPUs and the least lost progress. None when the node cannot be freed for the preemptor."""
    have = len(slot.free)
    ready = now
    for occ in slot.occupants:
        if occ.leaving:
            have += occ.gpus
            ready = max(ready, occ.leave)
    if have >= need:
        return Victims((), (), 0, 0, ready)
    eligible: list[tuple[Occupant, PreemptReason]] = []
    for occ in slot.occupants:
        reason = victim_reason(occ, test)
        if reason is not None:
            eligible.append((occ, reason))
    if have + sum(o.gpus for o, _ in eligible) < need:
        return None
    chosen = fewest_victims(eligible, need - have, now)
    for occ, _ in chosen:
        ready = max(ready, now + grace(occ.job))
    return Victims(
        tuple(o for o, _ in chosen),
        tuple(r for _, r in chosen),
        sum(o.gpus for o, _ in chosen),
        sum(lost_work(o, now) for o, _ in chosen),
        ready,
    )


def lost_work(occ: Occupant, now: Seconds) -> int:
    """Rule `least-lost-work`: the seconds of work a preemption now would cost this occupant's job."""
    return unsaved_work(occ.job.run, now)


def _victim_key(occ: Occupant, now: Seconds) -> tuple[int, int, str]:
    return (occ.gpus, lost_work(occ, now), occ.job.id)
