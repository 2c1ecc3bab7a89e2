"""Allotment's policy: one scheduling decision, decide(snapshot, now) → Decisions.

Owns: the order of the cycle's steps. Each step is a named rule documented in docs/policy.md:

 1. end-of-life          — work on lost nodes and forced drains leaves (refunded); max runtime, session length and
                           idle sessions end (running.py); then work whose owner cancelled it leaves, not requeued
                           (cancellation.py)
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
                           the session room unclaimed; guaranteed work first, then opportunistic work, but a budget
                           below its share is served whole in the first pass (opportunistic-entitlement; pending.py,
                           reservations.py)
 9. gang-backfill        — gangs still waiting for capacity start on nodes plans claim where they cannot delay them
                           (pending.py)
10. headroom-refill      — clusters short of session headroom preempt opportunistic or slice-expired work
                           (pending.py)
11. explain-waiting      — every job still pending gets a reason in numbers, an estimated start and hints
                           (reasons.py); draining nodes get their estimated empty time

Each step's signature names the parts of the cycle's state (state.py) it reads and writes: end-of-life, drain and
headroom-refill take the indices, capacity and outcome; slice-renewal also the window book; the standings and
drain estimates only read. The steps over pending work take the whole CycleState: they reach funding's caches,
fair share, the windows and the victim index, and change the outcome only through its mark methods.

Decisions.wake_at says when to decide again even if nothing happens (a plan's victim falls due to be told to leave).
Then the cycle's state is released (CycleState.release) so that reference counting frees it at once.

Must not: read a clock, touch I/O or draw random numbers: the same snapshot and `now` always give the same decisions.
"""

from __future__ import annotations

from allotment.core.cancellation import cancellations
from allotment.core.decisions import Decisions, Standing
from allotment.core.fairshare import FairShare
from allotment.core.indices import Indices
from allotment.core.model import Seconds, Snapshot
from allotment.core.outcome import Outcome
from allotment.core.pending import (
    fair_share_order,
    gang_backfill_on_claimed_nodes,
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
    keeps_session_room = True
    """It keeps a session room free (rule `session-room`): the simulator's idle-GPU breakdown names it."""

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        st = CycleState(snapshot, now)
        ix, cap, out = st.ix, st.cap, st.out
        standings = _standings(ix, st.fs, out)
        run_steps(st)
        explainer = Explainer(st)
        pending = {
            job.id: explainer.explain(job) for job in snapshot.jobs if job.run is None and job.id not in out.started
        }
        decisions = Decisions(
            starts=tuple(out.starts),
            preempts=tuple(out.preempts),
            renews=tuple(out.renews),
            lapses=tuple(out.lapses),
            reserves=tuple(out.reserves),
            pending=pending,
            drain_estimates=drain_estimates(ix, cap),
            standings=standings,
            wake_at=out.wake_at,
        )
        st.release()
        return decisions


def run_steps(st: CycleState) -> None:
    """Steps 1–10 of the cycle, in their order (the module docstring): everything decide() does before it explains
    the jobs still waiting. What they decide is in `st.out`."""
    ix, cap, out = st.ix, st.cap, st.out
    end_of_life(ix, cap, out)
    cancellations(ix, cap, out)
    carried = install_carried(st)
    slice_ends(ix, cap, st.windows, out)
    drains(ix, cap, out)
    reserved_first(st, carried)
    sessions_first(st)
    window_claims(st)
    fair_share_order(st)
    gang_backfill_on_claimed_nodes(st)
    headroom_refill(ix, cap, out)


def _standings(ix: Indices, fs: FairShare, out: Outcome) -> dict[str, Standing]:
    """Each leaf budget's money and fair share as the cycle begins."""
    found: dict[str, Standing] = {}
    for name in sorted(ix.leaves):
        found[name] = Standing(
            balance=ix.balance(name),
            committed=out.committed.get(name, 0),
            entitled=fs.entitled(name),
            used=fs.used(name),
        )
    return found
