"""The old priority scheduler from the story (docs/baselines.md, "priority"; /work/shared/DESIGN.md).

Owns the rules:
- one global queue in order of the job's own priority (higher first), then age: priorities are compared across
  teams, so a user who sets the top priority jumps every other team's queue (users inflated priority; the policy
  honours job.priority as set);
- per-team limits on non-preemptible GPUs: a guaranteed-contract job starts non-preemptible while its team (leaf
  budget) and every ancestor stay within their limits, else it starts preemptible ("above the limit");
  opportunistic jobs are always preemptible. A budget's limit is its `max_gpus` where set; a leaf without one gets
  its allocation share of the fleet's GPUs (rounded down);
- a job that does not fit preempts preemptible work of strictly lower priority (any team): fewest victims, lowest
  priority first, youngest first; non-preemptible work is never preempted by scheduling;
- drains: preemptible work leaves now, non-preemptible work stays until it ends (the on-call negotiations of the
  story); sessions are never reclaimed when idle.

Must not: read a clock, do I/O or draw random numbers.
"""

from __future__ import annotations

from functools import partial

from allotment.core.decisions import Blocker, Decisions, PreemptReason
from allotment.core.model import ContractClass, Job, RunClass, Seconds, Snapshot
from allotment.core.placement import Placement
from allotment.policies.common import Frame, drain_all, end_of_life, pending_jobs, static_shares
from allotment.policies.preempting import NoRoom, carry_rooms, find_room, ready_at, take_room


def _preemptible(job: Job) -> bool:
    return job.run is not None and job.run.run_class is RunClass.OPPORTUNISTIC


def _victim_of(priority: int, job: Job) -> bool:
    """Preemptible work of strictly lower priority gives way."""
    return _preemptible(job) and job.priority < priority


def _victim_order(job: Job) -> tuple[object, ...]:
    """Lowest priority first, then the most recently started."""
    return (job.priority, -(job.run.started_at if job.run is not None else 0), job.id)


class OldPriority:
    name = "priority"

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        frame = Frame(snapshot, now)
        end_of_life(frame)
        drain_all(frame, _preemptible)
        st = frame.st
        fleet = sum(frame.cap.pool_capacity.values())
        shares = static_shares(snapshot.budgets)
        limits: dict[str, int] = {}
        for b in snapshot.budgets:
            if b.max_gpus is not None:
                limits[b.name] = b.max_gpus
            elif b.name in st.ix.leaves:
                limits[b.name] = int(fleet * shares.get(b.name, 0.0))
        protected: dict[str, int] = {}
        for job in snapshot.jobs:
            if job.run is not None and not _preemptible(job) and job.id not in st.out.preempted:
                for name in st.fs.ancestors(job.budget):
                    protected[name] = protected.get(name, 0) + job.run.gpu_count
        promised: dict[int, int] = {}
        no_room = NoRoom(frame)

        def start(job: Job, placement: Placement) -> None:
            """Start non-preemptible within the team's limits, preemptible above them."""
            over = any(
                name in limits and protected.get(name, 0) + job.total_gpus > limits[name]
                for name in st.fs.ancestors(job.budget)
            )
            if job.contract is ContractClass.GUARANTEED and not over:
                frame.start(job, placement, "priority")
                for name in st.fs.ancestors(job.budget):
                    protected[name] = protected.get(name, 0) + placement.gpus
            else:
                frame.start(job, placement, "priority-preemptible", RunClass.OPPORTUNISTIC)

        carried = carry_rooms(frame, promised, start)
        for job in sorted(pending_jobs(snapshot), key=lambda j: (-j.priority, j.submitted_at, j.id)):
            if job.id in carried:
                continue
            placement = frame.place_now(job)
            if placement is not None:
                start(job, placement)
                continue
            if not frame.can_ever_run(job):
                continue
            shape = (frame.access(job), frame.pools(job), job.gpus, job.replicas)
            room = None
            if not no_room.known(shape, job.priority):
                room = find_room(frame, job, partial(_victim_of, job.priority), _victim_order, promised)
            if room is None:
                no_room.record(shape, job.priority)
                frame.wait(
                    job,
                    Blocker.CAPACITY,
                    f"needs {job.total_gpus} GPUs at priority {job.priority}; the rest are held by non-preemptible "
                    "work or by work of equal or higher priority",
                )
                continue
            take_room(frame, job, room, PreemptReason.PRIORITY, promised)
            names = ", ".join(frame.cap.nodes[i].node.name for i, _ in room.nodes)
            frame.wait(
                job,
                Blocker.WAITING_FOR_GRACE,
                f"waits on {names} for lower-priority preemptible work leaving for it ({len(room.victims)} told to "
                "leave in this cycle)",
                ready_at(frame, room),
            )
        return frame.decisions()
