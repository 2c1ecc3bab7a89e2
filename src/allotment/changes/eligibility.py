"""Which pending jobs the scheduler may consider: the one eligibility gate every store's snapshot passes through.

Owns: the rule that keeps a pending job out of the scheduling snapshot, and the reason such a job waits. Today a
job is kept out while it is held (Slurm's JobHeldUser / JobHeldAdmin: `HOLD_USER` set by its owner or anyone who
may manage it, `HOLD_ADMIN` set by an administrator and released only by one); the reason names the hold and who
may release it. A kept-out job is never seen by `core.decide`, so it is never started, planned or counted as
demand, and its reason is written beside the ones decide() explains (changes.steps.reason_changes).

Must not: read anything (changes.snapshot.assemble hands it each pending job's facts), decide who may hold or
release a job (service.jobcontrol does), or schedule anything (allotment.core does, for the jobs it lets through).
"""

from __future__ import annotations

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


def gate(job: Job, hold: str | None) -> WaitReason | None:
    """Why the pending `job` may not be considered by the scheduler this cycle, or None when it may."""
    if hold is not None:
        return held_reason(job, hold)
    return None
