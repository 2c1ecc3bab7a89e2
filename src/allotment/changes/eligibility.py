"""Which pending jobs the scheduler may consider: the one eligibility gate every store's snapshot passes through.

Owns: the rules that keep a pending job out of the scheduling snapshot, and the reason such a job waits. A job is
kept out while it is held (Slurm's JobHeldUser / JobHeldAdmin: `HOLD_USER` set by its owner or anyone who may manage
it, `HOLD_ADMIN` set by an administrator and released only by one); the reason names the hold and who may release
it. A task of a job array with a limit (`%N`, Slurm's JobArrayTaskLimit) is kept out while N tasks of its array are
active: of its waiting tasks (pending, not being cancelled, let through by every other rule here) only the first N -
active by index reach the core, so however many the policy starts in one cycle, at most N run at once. A kept-out
job is never seen by `core.decide`, so it is never started, planned or counted as demand, and its reason is written
beside the ones decide() explains (changes.steps.reason_changes).

Must not: read anything (changes.snapshot.assemble hands it each pending job's facts), decide who may hold or
release a job (service.jobcontrol does), or schedule anything (allotment.core does, for the jobs it lets through).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from allotment.core.decisions import Blocker, WaitReason
from allotment.core.model import Job

HOLD_USER = "user"
"""Held by its owner (or a lead or administrator acting as one): anyone who may manage the job releases it."""
HOLD_ADMIN = "admin"
"""Held by an administrator: only an administrator releases it."""
HOLDS: tuple[str, ...] = (HOLD_USER, HOLD_ADMIN)

_HELD_MESSAGE = {
    HOLD_USER: "held by its owner (user hold): not considered until released (allot release {job})",
    HOLD_ADMIN: "held by an administrator (admin hold): not considered until an administrator releases it",
}


def held_reason(job: Job, hold: str) -> WaitReason:
    """Why a held job waits: which hold, and who may release it."""
    return WaitReason(Blocker.HELD, _HELD_MESSAGE[hold].format(job=job.id), job.total_gpus, 0, None)


@dataclass(slots=True)
class ArrayLoad:
    """One limited array's tasks as a snapshot loader saw them (changes.snapshot.assemble counts them)."""

    limit: int
    """The most tasks that may run at once (`%N`)."""
    gpus: int
    """GPUs one task holds (every task asks for the same)."""
    active: int = 0
    """Tasks holding GPUs: running, preempting, or pending while a run has not ended yet."""
    waiting: list[tuple[int, str]] = field(default_factory=list)
    """The pending tasks every other rule of the gate lets through: (index, job id)."""


def array_limit_reason(array_id: str, load: ArrayLoad) -> WaitReason:
    """Why a task of a limited array waits: the limit, named (its text does not change while it waits, so the reason
    is written once, not each time a task of the array starts or ends)."""
    message = (
        f"its array {array_id} runs at most {load.limit} tasks at once (%{load.limit}): it starts after one of"
        " them ends"
    )
    return WaitReason(Blocker.ARRAY_LIMIT, message, load.gpus, 0, None)


def array_throttle(loads: Iterable[tuple[str, ArrayLoad]]) -> dict[str, WaitReason]:
    """The tasks the `%N` rule keeps out this cycle, with why (one reason per array): of each array's waiting tasks
    (those `gate` let through), all but the first `limit - active` by index."""
    kept: dict[str, WaitReason] = {}
    for array_id, load in loads:
        ready = sorted(load.waiting)
        room = max(load.limit - load.active, 0)
        if len(ready) <= room:
            continue
        reason = array_limit_reason(array_id, load)
        for _, jid in ready[room:]:
            kept[jid] = reason
    return kept


def gate(job: Job, hold: str | None) -> WaitReason | None:
    """Why the pending `job` may not be considered by the scheduler this cycle, or None when it may (an array task it
    lets through is then counted by `array_throttle`, so a task kept out by any rule here takes no place in `%N`)."""
    if hold is not None:
        return held_reason(job, hold)
    return None
