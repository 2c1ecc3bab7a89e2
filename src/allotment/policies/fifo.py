"""FIFO baselines (docs/baselines.md, "fifo" and "fifo-strict").

Owns:
- `FifoBackfill` ("fifo"): first come, first served, with EASY backfill — the first job of each partition that
  cannot start gets a planned start from known end times (time limits, session lengths, kill deadlines), and later
  jobs start only where they cannot delay it;
- `StrictFifo` ("fifo-strict"): first come, first served with no backfill: a job that cannot start blocks every
  later job of its partition that could use its pools. Placement is the core's consolidated placement (a job that
  fits one node goes on one node, best fit; larger gangs on whole nodes), so a replay of a trace is a reference.

Both ignore priorities, budgets and money, never preempt, and let draining nodes empty as their jobs end.

Must not: read a clock, do I/O or draw random numbers.
"""

from __future__ import annotations

from allotment.core.decisions import Decisions
from allotment.core.model import Job, Seconds, Snapshot
from allotment.policies.common import Frame, end_of_life, pending_jobs
from allotment.policies.queue import QueueRules, walk


def _arrival_order(snapshot: Snapshot) -> list[Job]:
    return sorted(pending_jobs(snapshot), key=lambda j: (j.submitted_at, j.id))


class FifoBackfill:
    """FIFO with EASY backfill."""

    name = "fifo"

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        frame = Frame(snapshot, now)
        end_of_life(frame)
        walk(frame, _arrival_order(snapshot), QueueRules(rule="fifo", plans_per_partition=1))
        return frame.decisions()


class StrictFifo:
    """Strict FIFO with consolidated placement: the reference replay."""

    name = "fifo-strict"

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        frame = Frame(snapshot, now)
        end_of_life(frame)
        walk(frame, _arrival_order(snapshot), QueueRules(rule="fifo", strict=True))
        return frame.decisions()
