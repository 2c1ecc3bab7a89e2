"""The engine cycle's named steps besides deciding, each a pure function to a ChangeSet.

Owns: period rollover (open runs charged up to the old period's end, in the old period), usage decay (every
budget's fair-share usage decayed to now, plus what its open runs held since the last cycle), periodic charging
(open runs charged up to now once `charge_every` has passed since their last charge) and reason writing (the
pending reasons that changed since they were last written, with the memo of what was written).

Must not: price or decay anything itself (allotment.ledger does), read a clock, or read and write rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping

from allotment.changes.records import ChangeSet, OpenRun, ReasonRow, UsageUpdate
from allotment.core.decisions import Decisions, WaitReason
from allotment.core.model import Micro, Seconds
from allotment.ledger.charges import accrue
from allotment.ledger.periods import Period
from allotment.ledger.usage import usage_after


def rollover_charges(runs: Iterable[OpenRun], old: Period) -> ChangeSet:
    """Period rollover: every open run charged up to the end of the period that is ending, in that period."""
    return charges(runs, ChangeSet(), old.end, old.id)


def periodic_charges(
    runs: Iterable[OpenRun], so_far: ChangeSet, now: Seconds, period_id: str, every: Seconds
) -> ChangeSet:
    """Periodic charging: the open runs not charged for `every` seconds are charged up to `now` (`so_far`: the
    cycle's changes before this step, whose meters and ends count)."""
    return charges(runs, so_far, now, period_id, due_before=now - every)


def charges(
    runs: Iterable[OpenRun], so_far: ChangeSet, until: Seconds, period_id: str, due_before: Seconds | None = None
) -> ChangeSet:
    """Open runs charged up to `until` (with `due_before`, only those charged no later than it), from the meters
    `so_far` left; runs `so_far` ended are skipped."""
    ended = {e.run_id for e in so_far.ended}
    changes = ChangeSet()
    meters = so_far.meters
    for run in runs:
        if run.run_id in ended:
            continue
        meter = meters.get(run.run_id)
        charged_until = run.charged_until if meter is None else meter.charged_until
        if due_before is not None and charged_until > due_before:
            continue  # checked before a Meter is built: most runs are not due in a given cycle
        if meter is None:
            meter = run.meter
        entry, advanced = accrue(meter, until, period_id)
        if advanced is not meter:
            changes.meters[run.run_id] = advanced
        if entry is not None:
            changes.entries.append(entry)
    return changes


def held_rates(runs: Iterable[OpenRun]) -> dict[str, Micro]:
    """Budget → Σ full-price rate of its open runs."""
    held: dict[str, Micro] = {}
    for run in runs:
        held[run.budget] = held.get(run.budget, 0) + run.rate
    return held


def decay_usage(
    usage: Mapping[str, tuple[float, Seconds]],
    held: Mapping[str, Micro],
    last: Seconds | None,
    now: Seconds,
    half_life: Seconds,
) -> ChangeSet:
    """Usage decay: every budget's decayed usage brought to `now`, adding what its open runs held (`held`, at full
    price) since its last update; a budget first seen starts at zero. `usage`: budget → (usage, as of); `last`:
    when this step last ran (a cycle at or before it changes nothing)."""
    changes = ChangeSet()
    if last is not None and now <= last:
        return changes
    for budget in sorted(set(usage) | set(held)):
        row = usage.get(budget)
        if row is None:
            changes.usage.append(UsageUpdate(budget, 0.0, now, new=True))
        elif now > row[1]:
            changes.usage.append(
                UsageUpdate(budget, usage_after(row[0], row[1], now, half_life, held.get(budget, 0)), now)
            )
    changes.state["usage_at"] = now
    return changes


# -- reason writing ------------------------------------------------------------------------------------------------
ReasonValues = tuple[object, ...]
"""(blocker, message, needed GPUs, free GPUs, estimated start, hints as (kind, detail, start))"""

ESTIMATE_TOLERANCE = 300
"""A pending reason is rewritten when anything but its estimated start changed, or the estimate moved more than this
many seconds: estimates drift a little every cycle and rewriting thousands of rows for that is waste."""


def reason_values(r: WaitReason) -> ReasonValues:
    return (
        r.blocker.value,
        r.message,
        r.needed_gpus,
        r.free_gpus,
        r.estimated_start,
        tuple((h.kind.value, h.detail, h.start) for h in r.hints),
    )


def _same_reason(old: ReasonValues | None, new: ReasonValues) -> bool:
    if old is None:
        return False
    if old[:4] != new[:4] or _hint_text(old[5]) != _hint_text(new[5]):
        return False
    a, b = old[4], new[4]
    if a is None or b is None:
        return a is b
    assert isinstance(a, int) and isinstance(b, int)
    return abs(a - b) <= ESTIMATE_TOLERANCE


def _hint_text(hints: object) -> object:
    """Hints without their start times (a "start now" hint's time moves with every cycle)."""
    assert isinstance(hints, tuple)
    return tuple(h[:2] for h in hints)


def reason_changes(
    decisions: Decisions,
    now: Seconds,
    memo: MutableMapping[str, ReasonValues],
    gated: Mapping[str, WaitReason] | None = None,
) -> ChangeSet:
    """Reason writing: the pending reasons that changed since they were last written (`memo`: job id → the values
    last written, brought up to date here), and the deletion of the reasons of jobs that started. `gated`: the
    pending jobs the eligibility gate kept from decide() (changes.eligibility), with their reasons, written alike.

    decide() hands one WaitReason object to every job of one shape and blocker, so the values are built once per
    object and shared in the memo, and each (last written, new) pair of shared values is compared once."""
    changes = ChangeSet()
    pending: Mapping[str, WaitReason] = decisions.pending
    if gated:
        pending = {**pending, **gated}
    values_of: dict[int, ReasonValues] = {}
    verdicts: dict[tuple[int, int], tuple[ReasonValues | None, bool]] = {}  # holds `old`, so its id stays its own
    for job_id, reason in pending.items():
        values = values_of.get(id(reason))
        if values is None:
            values = values_of[id(reason)] = reason_values(reason)
        old = memo.get(job_id)
        pair = (id(old), id(values))
        if pair not in verdicts:
            verdicts[pair] = (old, _same_reason(old, values))
        if not verdicts[pair][1]:
            memo[job_id] = values
            blocker, message, needed, free, estimate, hints = values
            assert isinstance(blocker, str) and isinstance(message, str)
            assert isinstance(needed, int) and isinstance(free, int) and isinstance(hints, tuple)
            assert estimate is None or isinstance(estimate, int)
            changes.reasons.append(ReasonRow(job_id, blocker, message, needed, free, estimate, hints, now))
    for j in [j for j in memo if j not in pending]:
        del memo[j]
    changes.reasons_gone += sorted({s.job_id for s in decisions.starts})
    return changes


def standings_json(decisions: Decisions) -> dict[str, dict[str, float | int]]:
    """Each leaf budget's fair-share standing as the cycle computed it (shown by `why` and the dashboard)."""
    return {
        name: {
            "balance": st.balance,
            "committed": st.committed,
            "entitled": round(st.entitled, 6),
            "used": round(st.used, 6),
            "ratio": round(st.ratio, 4) if st.ratio != float("inf") else -1,
        }
        for name, st in decisions.standings.items()
    }
