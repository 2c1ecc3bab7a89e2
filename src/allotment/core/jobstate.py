"""The states a job moves through, defined once for the whole system.

Owns: `JobState` and the two sets every layer asks about — ACTIVE (the scheduler still owes the job something:
it waits, runs or is leaving) and FINAL (nothing more will happen to it).

Must not: say when a job moves (the change-set rules do) or how a state is stored (the database keeps the value).
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    PENDING = "pending"  # waiting for GPUs (new, or requeued after a preemption or a lost node)
    RUNNING = "running"  # holds GPUs
    PREEMPTING = "preempting"  # told to leave; holds its GPUs until it exits or its grace ends
    COMPLETED = "completed"  # exited 0, or ended by a final preemption (session end, idle session)
    FAILED = "failed"  # exited non-zero, or reached its maximum runtime
    CANCELLED = "cancelled"  # its owner cancelled it
    LOST = "lost"  # its node was lost and it does not requeue


ACTIVE: frozenset[JobState] = frozenset({JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING})
"""States in which the job still waits, runs or leaves: the ones a scheduling snapshot holds."""

FINAL: frozenset[JobState] = frozenset(JobState) - ACTIVE
"""States a job never leaves."""

ACTIVE_ORDERED: tuple[JobState, ...] = (JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING)
"""ACTIVE in a fixed order, for queries whose text must not change from one process to the next."""
