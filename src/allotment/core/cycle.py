"""Allotment's policy: one scheduling decision, decide(snapshot, now) → Decisions.

Owns: the order of the cycle's steps. Each step is a named rule documented in docs/policy.md:

 1. end-of-life          — work on lost nodes and forced drains leaves (refunded); max runtime, session length and
                           idle sessions end (running.py)
 2. carried-reservation  — last cycle's reservations keep their nodes while still valid (running.py)
 3. slice-renewal        — slices that ended are renewed if funded and harmless to plans and windows, else lapse
                           (running.py)
 4. drain                — preemptible work leaves draining nodes (running.py)
 5. reserved-first       — reserved jobs start on their GPUs when free, or the work there is told to leave
                           (pending.py)
 6. sessions-first       — sessions within limits start, in headroom or by taking preemptible work (pending.py)
 7. window-claims        — open capacity windows serve their budget's jobs on their pool (pending.py)
 8. fair-share-order     — budgets in hierarchical fair-share order, each budget's jobs by priority then age: start
                           in free GPUs, or by preemption per the victim rules, or get a planned start that leaves
                           the session room unclaimed (pending.py, reservations.py)
 9. headroom-refill      — clusters short of session headroom preempt opportunistic or slice-expired work
                           (pending.py)
10. explain-waiting      — every job still pending gets a reason in numbers, an estimated start and hints
                           (reasons.py); draining nodes get their estimated empty time

Decisions.wake_at says when to decide again even if nothing happens (a plan's victim falls due to be told to leave).
Then the cycle's state is released (CycleState.release) so that reference counting frees it at once.

Must not: read a clock, touch I/O or draw random numbers: the same snapshot and `now` always give the same decisions.
"""

from __future__ import annotations

from allotment.core.decisions import Decisions, Standing
from allotment.core.model import Seconds, Snapshot
from allotment.core.pending import (
    fair_share_order,
    headroom_refill,
    reserved_first,
    sessions_first,
    window_claims,
)
from allotment.core.reasons import Explainer
from allotment.core.running import drain_estimates, drains, end_of_life, install_carried, slice_ends
from allotment.core.state import CycleState


class AllotmentPolicy:
    """Budgets, hierarchical fair share and time-slicing contracts (the policy this project exists for)."""

    name = "allotment"

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        st = CycleState(snapshot, now)
        standings = _standings(st)
        end_of_life(st)
        carried = install_carried(st)
        slice_ends(st)
        drains(st)
        reserved_first(st, carried)
        sessions_first(st)
        window_claims(st)
        fair_share_order(st)
        headroom_refill(st)
        explainer = Explainer(st)
        pending = {
            job.id: explainer.explain(job) for job in snapshot.jobs if job.run is None and job.id not in st.out.started
        }
        decisions = Decisions(
            starts=tuple(st.out.starts),
            preempts=tuple(st.out.preempts),
            renews=tuple(st.out.renews),
            lapses=tuple(st.out.lapses),
            reserves=tuple(st.out.reserves),
            pending=pending,
            drain_estimates=drain_estimates(st),
            standings=standings,
            wake_at=st.out.wake_at,
        )
        st.release()
        return decisions


def _standings(st: CycleState) -> dict[str, Standing]:
    out: dict[str, Standing] = {}
    for name in sorted(st.ix.leaves):
        acc = st.ix.snap.accounts.get(name)
        out[name] = Standing(
            balance=acc.balance if acc is not None else 0,
            committed=st.out.committed.get(name, 0),
            entitled=st.fs.entitled(name),
            used=st.fs.used(name),
        )
    return out
