"""Rule `least-lost-work` (docs/policy.md §5 and §8): what calling running work away costs, from its checkpoints.

Owns: the work a run told to leave at some time would lose (`unsaved_at`: the time since its last checkpoint — the
last one it reported, or, while its reports keep their rhythm, the one that rhythm predicts by then; since its start
when it reported none) and the planned start that loses the least of its victims' work within `checkpoint_wait` of
the earliest one (`least_lost_start`, from the instants after the victims' predicted checkpoints:
`saving_starts`).

Must not: choose victims, nodes or plans (preemption.py and reservations.py do), read a clock, or guess a rhythm a
job has not shown: without a report nothing is predicted, and a checkpoint overdue by more than MARGIN ends the
prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from allotment.core.model import Run, Seconds

MARGIN: Final = 60
"""Seconds a prediction allows for a checkpoint to be written and reported: a planned start that waits for one tells
its victim to leave this long after the predicted checkpoint, and a report this late still keeps the rhythm."""

Victim = tuple[Run, int, Seconds]
"""A run a planned start would call away: the run, the GPUs its job holds (every node of a gang), its grace."""


def unsaved_work(run: Run | None, now: Seconds) -> int:
    """The seconds of work a preemption at `now` would cost this run's job: the time since its last reported
    checkpoint, or since the run started when it reported none."""
    if run is None:
        return 0
    saved = run.started_at if run.checkpoint_at is None else max(run.started_at, run.checkpoint_at)
    return max(0, now - saved)


def _rhythm(run: Run, now: Seconds) -> tuple[Seconds, Seconds] | None:
    """(last report, interval) while the run's rhythm holds: it reported, and the next checkpoint is not overdue."""
    saved, every = run.checkpoint_at, run.checkpoint_every
    if saved is None or every is None or every <= 0 or now > saved + every + MARGIN:
        return None
    return saved, every


def keeps_rhythm(run: Run | None, now: Seconds) -> bool:
    """Whether a checkpoint of this run can be predicted: it reported, and its next checkpoint is not overdue."""
    return run is not None and _rhythm(run, now) is not None


def unsaved_at(run: Run, told: Seconds, now: Seconds) -> int:
    """The work the run would lose if told to leave at `told` (not before `now`): while its rhythm holds (a report,
    its interval, and the next checkpoint not overdue at `now`), the time since the checkpoint the rhythm predicts
    by then; otherwise the time since what it last reported."""
    rhythm = _rhythm(run, now)
    if rhythm is None or told < rhythm[0]:
        return unsaved_work(run, told)
    return (told - rhythm[0]) % rhythm[1]


def least_lost_start(base: Seconds, victims: Sequence[Victim], now: Seconds, wait: Seconds) -> Seconds:
    """The planned start in [base, base + wait] at which the victims, each told to leave its grace before it, lose
    the fewest GPU-seconds of work; ties go to the earliest. The candidates are `base` and the instants just after a
    victim's predicted checkpoint (`saving_starts`): between two of them every loss only grows."""
    if wait <= 0 or not victims:
        return base
    candidates = {base}
    for run, _gpus, grace in victims:
        candidates.update(saving_starts(run, grace, base, base + wait, now))
    if len(candidates) == 1:
        return base
    return min(candidates, key=lambda t: (lost_at(victims, t, now), t))


def saving_starts(run: Run, grace: Seconds, lo: Seconds, hi: Seconds, now: Seconds) -> list[Seconds]:
    """The planned starts in [lo, hi] just after a checkpoint the run's rhythm predicts (checkpoint + MARGIN + its
    grace: it is told to leave a margin after saving); none while it keeps no rhythm."""
    rhythm = _rhythm(run, now)
    if rhythm is None:
        return []
    saved, every = rhythm
    first = saved + MARGIN + grace
    k = max(0, -(-(lo - first) // every))  # the first predicted checkpoint whose call is at or after lo
    return list(range(first + k * every, hi + 1, every))


def lost_at(victims: Sequence[Victim], start: Seconds, now: Seconds) -> int:
    """The GPU-seconds of work the victims lose when a plan starts at `start` (each told to leave its grace before)."""
    return sum(gpus * unsaved_at(run, start - grace, now) for run, gpus, grace in victims)
