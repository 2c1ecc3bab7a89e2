"""Backfill planning for the baselines: per node, how many GPUs are free over time, from known end times and the
planned starts made so far in the cycle (docs/baselines.md, "Backfill").

Owns: the availability profile of each node — free GPUs now, plus the GPUs of each running job from its known end
on, minus the GPUs of each planned start from its planned time on (a planned job is assumed to run for ever, the
conservative choice), kept as steps (the times it changes, the free GPUs from each on) — the test "can this job run
on this node over [start, end) without taking GPUs a planned start counts on", the earliest planned start of a job
(one node, or k whole nodes at the same time; one pass over a node's steps), taking GPUs for starts and plans, and
remembering, within the cycle, the job shapes already shown to have no planned start.

Why remembering "no planned start" is sound, for every shape (one node or k whole nodes, a bounded span or for ever):
- the search is exact: `plan` finds a start whenever some time t exists at which k of the shape's candidate nodes
  can each hold `need` GPUs over [t, t + span). Such a t can always be moved back to a step time: on a node, a
  feasible t inside a step stays feasible down to the step's start (the window keeps its first step and ends
  earlier), so every node's feasible times are intervals opening at its step times, and the first common time of
  k nodes is the latest of their openings — a step time of one of them, no earlier than the first time any node
  could. `_plan_in` tries exactly those times (each node's first feasible time, then every later time a feasible
  node's availability changes), and `_first_fit` picks nodes whenever k fit;
- within a cycle availability only falls: `take` lowers a node's free GPUs over [now, end) and `hold` over
  [start, start + span), and nothing ever raises it. So a shape with no feasible time keeps having none.
- the shape is everything the search reads: the job's pools, GPUs per replica and replicas (with each pool's node
  size: how many nodes and how many GPUs each), its node access (the ownership rule) and its span.
A method that raised availability, or a search that tried fewer times, would have to drop the memo.

Must not: order jobs or decide who starts (fifo.py and slurm.py do), or change the cycle's Capacity.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Sequence
from dataclasses import dataclass

from allotment.core.capacity import Pool
from allotment.core.model import Job, Seconds
from allotment.core.placement import choose_block, node_size, nodes_needed
from allotment.policies.common import Frame, known_duration


@dataclass(frozen=True, slots=True)
class Plan:
    """A planned start: the job may start on these nodes at `start` (node index, GPUs)."""

    pool: Pool
    nodes: tuple[tuple[int, int], ...]
    start: Seconds


def earliest_start(
    times: Sequence[Seconds], levels: Sequence[int], gpus: int, duration: Seconds | None
) -> Seconds | None:
    """The first of `times` from which `levels` (the free GPUs from each time on, to the next) stay at least `gpus`
    for `duration` seconds (None: for ever); None if there is none."""
    j, n = 0, len(times)
    while j < n:
        if levels[j] < gpus:
            j += 1
            continue
        end = None if duration is None else times[j] + duration
        k = j + 1
        while k < n and (end is None or times[k] < end) and levels[k] >= gpus:
            k += 1
        if k == n or (end is not None and times[k] >= end):
            return times[j]
        j = k + 1  # every start up to times[k] spans the step that is too low
    return None


class Timeline:
    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.now = frame.now
        self.free: dict[int, int] = {}
        self.events: dict[int, list[tuple[Seconds, int]]] = {}
        """Node index → (time, change of free GPUs) in time order: + at a known end, − at a planned start."""
        self._profiles: dict[int, tuple[list[Seconds], list[int]]] = {}
        """Node index → its availability as steps: the times it changes (now first) and the free GPUs from each on.
        Built when first asked for, dropped when the node's events change (take, hold)."""
        self._no_plan: set[tuple[object, ...]] = set()
        """Job shapes (`shape`) already shown this cycle to have no planned start: they never get one later in it."""
        for slot in frame.cap.nodes:
            if not slot.accepts:
                continue
            self.free[slot.idx] = len(slot.free)
            events: list[tuple[Seconds, int]] = []
            for occ in slot.occupants:
                end = frame.ends.get(occ.job.id)
                if end is not None:
                    events.append((max(end, self.now), occ.gpus))
            events.sort()
            self.events[slot.idx] = events

    def _profile(self, idx: int) -> tuple[list[Seconds], list[int]]:
        found = self._profiles.get(idx)
        if found is None:
            times, levels = [self.now], [self.free[idx]]
            for t, d in self.events[idx]:  # every event is at now or later
                if t == times[-1]:
                    levels[-1] += d
                else:
                    times.append(t)
                    levels.append(levels[-1] + d)
            found = self._profiles[idx] = (times, levels)
        return found

    def available(self, idx: int, at: Seconds) -> int:
        times, levels = self._profile(idx)
        return levels[max(bisect_right(times, at) - 1, 0)]

    def fits(self, idx: int, gpus: int, start: Seconds, end: Seconds | None) -> bool:
        """Could `gpus` GPUs of the node be held over [start, end) (end None: for ever) without taking GPUs that a
        planned start counts on? (`start` is now or later.)"""
        if idx not in self.free:
            return False
        times, levels = self._profile(idx)
        j = max(bisect_right(times, start) - 1, 0)
        if levels[j] < gpus:
            return False
        for k in range(j + 1, len(times)):
            if end is not None and times[k] >= end:
                break
            if levels[k] < gpus:
                return False
        return True

    def fits_now(self, job: Job, idx: int, gpus: int) -> bool:
        return self.fits(idx, gpus, self.now, self.frame.end_if_started(job))

    def earliest_on(self, idx: int, gpus: int, duration: Seconds | None) -> Seconds | None:
        """The earliest time the node could hold `gpus` GPUs for `duration` (None: for ever). Only the times its
        availability changes can be that time, and a step below `gpus` inside a candidate's span rules out every
        candidate up to that step too (their spans hold it as well): one pass over the steps."""
        if idx not in self.free:
            return None
        times, levels = self._profile(idx)
        return earliest_start(times, levels, gpus, duration)

    def span(self, job: Job) -> Seconds | None:
        """How long a job holds its GPUs at most once started (its time limit plus grace); None: unbounded."""
        d = known_duration(job)
        return None if d is None else d + self.frame.st.ix.grace(job)

    def shape(self, job: Job) -> tuple[object, ...]:
        """What the search for a planned start reads of a job: two jobs of one shape get the same answer."""
        return (self.frame.pools(job), job.gpus, job.replicas, self.frame.access(job), self.span(job))

    def plan(self, job: Job) -> Plan | None:
        """The earliest start of the whole gang on nodes it may use, from known end times, in its allowed pools; a
        shape shown to have none earlier in the cycle is not searched again (sound: see the module docstring)."""
        key = self.shape(job)
        if key in self._no_plan:
            return None
        found = self.search(job)
        if found is None:
            self._no_plan.add(key)
        return found

    def search(self, job: Job) -> Plan | None:
        """`plan` without the memo: every pool is searched."""
        frame = self.frame
        duration = self.span(job)
        best: Plan | None = None
        for pool in frame.pools(job):
            size = node_size(frame.cap, pool)
            k = nodes_needed(job, size)
            if k == 0:
                continue
            need = job.total_gpus if k == 1 else size
            nodes = frame.usable(job, pool, need)
            if len(nodes) < k:
                continue
            found = self._plan_in(pool, nodes, need, k, duration)
            if found is not None and (best is None or found.start < best.start):
                best = found
        return best

    def _plan_in(self, pool: Pool, nodes: list[int], need: int, k: int, duration: Seconds | None) -> Plan | None:
        """The earliest time k of the nodes can each hold `need` GPUs for `duration`. Tries first the times at which
        some node first could (where a start almost always lies), then every time the availability changes."""
        earliest: dict[int, Seconds] = {}
        for i in nodes:
            t = self.earliest_on(i, need, duration)
            if t is not None:
                earliest[i] = t
        if len(earliest) < k:
            return None
        firsts = sorted(set(earliest.values()))
        found = self._first_fit(pool, [i for i in nodes if i in earliest], need, k, duration, firsts)
        if found is not None:
            return found
        every = sorted({t for i in earliest for t, _ in self.events[i] if t > firsts[0]} - set(firsts))
        return self._first_fit(pool, list(earliest), need, k, duration, every)

    def _first_fit(
        self, pool: Pool, nodes: list[int], need: int, k: int, duration: Seconds | None, times: list[Seconds]
    ) -> Plan | None:
        for t in times:
            end = None if duration is None else t + duration
            ok = [i for i in nodes if self.fits(i, need, t, end)]
            if len(ok) < k:
                continue
            if k == 1:
                # best fit: the node with the fewest GPUs available at the planned time, then the lowest index
                chosen = [min(ok, key=lambda i: (self.available(i, t), i))]
            else:
                picked = choose_block(
                    [(i, 0.0) for i in ok], k, self.frame.cap, self.frame.st.ix.topology.get(pool[0], ())
                )
                assert picked is not None
                chosen = picked
            return Plan(pool, tuple((i, need) for i in chosen), t)
        return None

    # -- changing ------------------------------------------------------------------------------------------------
    def take(self, idx: int, gpus: int, end: Seconds | None) -> None:
        """A job starts on the node now with `gpus` GPUs, freeing them at `end` (None: never, as far as known).
        Availability only falls (over [now, end)): the memo of shapes without a planned start stays true."""
        self.free[idx] -= gpus
        self._profiles.pop(idx, None)
        if end is not None:
            insort(self.events[idx], (end, gpus))

    def hold(self, plan: Plan, span: Seconds | None) -> None:
        """A planned start holds its GPUs from its planned time for `span` seconds (None: for ever). Availability
        only falls (over [start, start + span)): the memo of shapes without a planned start stays true."""
        for idx, gpus in plan.nodes:
            self._profiles.pop(idx, None)
            if plan.start <= self.now:
                self.free[idx] -= gpus
            else:
                insort(self.events[idx], (plan.start, -gpus))
            if span is not None:
                insort(self.events[idx], (plan.start + span, gpus))
