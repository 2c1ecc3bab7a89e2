"""Backfill planning for the baselines: per node, how many GPUs are free over time, from known end times and the
planned starts made so far in the cycle (docs/baselines.md, "Backfill").

Owns: the availability profile of each node — free GPUs now, plus the GPUs of each running job from its known end
on, minus the GPUs of each planned start from its planned time on (a planned job is assumed to run for ever, the
conservative choice) — the test "can this job run on this node over [start, end) without taking GPUs a planned
start counts on", the earliest planned start of a job (one node, or k whole nodes at the same time), and taking
GPUs for starts and plans.

Must not: order jobs or decide who starts (fifo.py and slurm.py do), or change the cycle's Capacity.
"""

from __future__ import annotations

from bisect import insort
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


class Timeline:
    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.now = frame.now
        self.free: dict[int, int] = {}
        self.events: dict[int, list[tuple[Seconds, int]]] = {}
        """Node index → (time, change of free GPUs) in time order: + at a known end, − at a planned start."""
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

    def available(self, idx: int, at: Seconds) -> int:
        return self.free[idx] + sum(d for t, d in self.events[idx] if t <= at)

    def fits(self, idx: int, gpus: int, start: Seconds, end: Seconds | None) -> bool:
        """Could `gpus` GPUs of the node be held over [start, end) (end None: for ever) without taking GPUs that a
        planned start counts on?"""
        if idx not in self.free:
            return False
        events = self.events[idx]
        level = self.free[idx]
        i, n = 0, len(events)
        while i < n and events[i][0] <= start:
            level += events[i][1]
            i += 1
        if level < gpus:
            return False
        while i < n and (end is None or events[i][0] < end):
            at = events[i][0]
            while i < n and events[i][0] == at:  # every change at one instant at once
                level += events[i][1]
                i += 1
            if level < gpus:
                return False
        return True

    def fits_now(self, job: Job, idx: int, gpus: int) -> bool:
        return self.fits(idx, gpus, self.now, self.frame.end_if_started(job))

    def earliest_on(self, idx: int, gpus: int, duration: Seconds | None) -> Seconds | None:
        """The earliest time the node could hold `gpus` GPUs for `duration` (None: for ever)."""
        if idx not in self.free:
            return None
        for t in [self.now] + [t for t, _ in self.events[idx] if t > self.now]:
            if self.fits(idx, gpus, t, None if duration is None else t + duration):
                return t
        return None

    def span(self, job: Job) -> Seconds | None:
        """How long a job holds its GPUs at most once started (its time limit plus grace); None: unbounded."""
        d = known_duration(job)
        return None if d is None else d + self.frame.st.ix.grace(job)

    def plan(self, job: Job) -> Plan | None:
        """The earliest start of the whole gang on nodes it may use, from known end times, in its allowed pools."""
        frame = self.frame
        duration = self.span(job)
        best: Plan | None = None
        for pool in frame.pools(job):
            size = node_size(frame.cap, pool)
            k = nodes_needed(job, size)
            if k == 0:
                continue
            need = job.total_gpus if k == 1 else size
            nodes = [
                i
                for i in frame.cap.pools[pool]
                if frame.cap.nodes[i].accepts
                and frame.cap.nodes[i].node.gpus >= need
                and frame.allowed(job, frame.cap.nodes[i])
            ]
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
        """A job starts on the node now with `gpus` GPUs, freeing them at `end` (None: never, as far as known)."""
        self.free[idx] -= gpus
        if end is not None:
            insort(self.events[idx], (end, gpus))

    def hold(self, plan: Plan, span: Seconds | None) -> None:
        """A planned start holds its GPUs from its planned time for `span` seconds (None: for ever)."""
        for idx, gpus in plan.nodes:
            if plan.start <= self.now:
                self.free[idx] -= gpus
            else:
                insort(self.events[idx], (plan.start, -gpus))
            if span is not None:
                insort(self.events[idx], (plan.start + span, gpus))
