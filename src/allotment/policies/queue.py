"""Walking one ordered queue of pending jobs, strictly or with backfill (docs/baselines.md, "Backfill").

Owns: the queue walk shared by "fifo", "fifo-strict" and "slurm": in the given order, start each job that fits in
free GPUs without delaying a planned start made earlier in the walk; give the first blocked jobs planned starts
from known end times (how many: EASY backfill plans only the first blocked job of each partition, Slurm's backfill
up to a limit); in strict mode, a blocked job blocks every later job of its partition that could use its pools.

Must not: decide the order (the policies do) or preempt anything (these baselines never preempt).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from allotment.core.capacity import NodeSlot, Pool
from allotment.core.decisions import Blocker, Reserve
from allotment.core.model import Job, ReservationKind, Seconds
from allotment.policies.common import Frame
from allotment.policies.timeline import Timeline


@dataclass(frozen=True, slots=True)
class QueueRules:
    rule: str
    """The rule name recorded on starts in order (a start around a planned start is recorded as "backfill")."""
    strict: bool = False
    """No backfill: a blocked job blocks later jobs of its partition on its pools."""
    plans_per_partition: int | None = 1
    """How many blocked jobs of one partition get a planned start (None: no per-partition limit)."""
    plans_total: int = 100
    """How many planned starts one cycle makes at most."""


def walk(frame: Frame, order: Sequence[Job], rules: QueueRules) -> None:
    timeline = Timeline(frame)
    since = {r.job_id: r.since for r in frame.snap.reservations}
    blocked: dict[str | None, tuple[str, set[Pool]]] = {}
    plans: dict[str | None, int] = {}
    total = 0
    for job in order:
        part = frame.partition(job)
        pools = frame.pools(job)
        if rules.strict:
            head = blocked.get(part)
            if head is not None and head[1].intersection(pools):
                frame.wait(job, Blocker.CAPACITY, f"strict FIFO: waits behind {head[0]}, the first blocked job")
                continue
            placement = frame.place_now(job)
            if placement is not None:
                frame.start(job, placement, rules.rule)
                continue
            if not frame.can_ever_run(job):
                continue  # its default reason says no pool can hold it; it blocks nobody
            entry = blocked.setdefault(part, (job.id, set()))
            entry[1].update(pools)
            plan = timeline.plan(job)
            _wait_capacity(frame, job, None if plan is None else plan.start, "first in line (strict FIFO)")
            continue
        placement = frame.place_now(job, partial(_fits_now, timeline, job))
        if placement is not None:
            end = frame.end_if_started(job)
            frame.start(job, placement, "backfill" if total else rules.rule)
            for idx, gpus in placement.nodes:
                timeline.take(idx, gpus, end)
            continue
        if not frame.can_ever_run(job):
            continue
        limit = rules.plans_per_partition
        if total < rules.plans_total and (limit is None or plans.get(part, 0) < limit):
            plan = timeline.plan(job)
            if plan is not None:
                timeline.hold(plan, timeline.span(job))
                plans[part] = plans.get(part, 0) + 1
                total += 1
                names = tuple((frame.cap.nodes[i].node.name, g) for i, g in plan.nodes)
                frame.st.out.mark_reserved(
                    Reserve(job.id, names, plan.start, ReservationKind.PLANNED, since.get(job.id, frame.now))
                )
                where = ", ".join(n for n, _ in names)
                frame.wait(
                    job,
                    Blocker.CAPACITY,
                    f"planned start on {where} when known end times there free {job.total_gpus} GPUs",
                    plan.start,
                )
                continue
            _wait_capacity(frame, job, None, "no planned start: the work in its way has no known end")
            continue
        if frame.place_now(job) is not None:
            frame.wait(job, Blocker.RESERVED, "the free GPUs that fit it are held for planned starts of earlier jobs")
        else:
            _wait_capacity(frame, job, None, "behind earlier jobs that hold planned starts")


def _fits_now(timeline: Timeline, job: Job, slot: NodeSlot, need: int) -> bool:
    return timeline.fits_now(job, slot.idx, need)


def _wait_capacity(frame: Frame, job: Job, estimated: Seconds | None, why: str) -> None:
    frame.wait(
        job,
        Blocker.CAPACITY,
        f"needs {job.total_gpus} GPUs; {frame.free_for(job)} free on nodes it may use; {why}",
        estimated,
    )
