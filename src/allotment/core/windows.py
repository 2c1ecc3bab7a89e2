"""Capacity windows (rule `capacity-windows`, docs/policy.md §7): a budget's right to N GPUs of a pool in [start, end).

Owns: counting, per window, the GPUs that other budgets hold inside run slices that reach into the window, and the
two rules built on it:
- `slice_end_before_window`: a slice of another budget on the pool ends by the window's start unless the pool keeps
  room for the window without it (promise 4, second half);
- `window_lends_idle`: while a window is open, another budget's job gets a slice on the pool only if the window's
  GPUs stay free of slices; otherwise it may use them only as preemptible work.
The window's own budget reclaims the pool at the start (preemption rule `window_reclaims`).

Must not: place jobs or emit decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from allotment.core.capacity import Pool
from allotment.core.model import CapacityWindow, Job, Seconds


class WindowBook:
    def __init__(
        self,
        windows: Iterable[CapacityWindow],
        jobs: Iterable[Job],
        capacity: Mapping[Pool, int],
        node_pool: Mapping[str, Pool],
        now: Seconds,
    ) -> None:
        self.now = now
        self.capacity = capacity
        self.by_pool: dict[Pool, list[CapacityWindow]] = {}
        for w in sorted(windows, key=lambda w: (w.start, w.id)):
            if w.end > now:
                self.by_pool.setdefault((w.cluster, w.gpu_type), []).append(w)
        # GPUs in slices of budgets other than the window's, on its pool, reaching past the window's start (or now)
        self.others_in_slice: dict[str, int] = {w.id: 0 for ws in self.by_pool.values() for w in ws}
        self.owners = {w.budget for ws in self.by_pool.values() for w in ws}
        self.version = 0
        """Counts slices granted in this cycle on pools with windows (the verdicts below may change with each)."""
        self.pool_version: dict[Pool, int] = dict.fromkeys(self.by_pool, 0)
        """The same count per pool."""
        if not self.by_pool:
            return
        for job in jobs:
            run = job.run
            if run is None or run.slice_end is None or run.slice_end <= now or run.preemption is not None:
                continue
            for alloc in run.placement:
                pool = node_pool.get(alloc.node)
                if pool is not None:
                    self._count(job.budget, pool, len(alloc.gpus), run.slice_end)

    def _count(self, budget: str, pool: Pool, gpus: int, slice_end: Seconds) -> None:
        for w in self.by_pool.get(pool, ()):
            if w.budget != budget and slice_end > max(w.start, self.now):
                self.others_in_slice[w.id] += gpus

    def windows_on(self, pool: Pool) -> list[CapacityWindow]:
        return self.by_pool.get(pool, [])

    def room(self, w: CapacityWindow) -> int:
        """GPUs of the pool that other budgets may hold in slices across the window."""
        return self.capacity.get((w.cluster, w.gpu_type), 0) - w.gpus

    def slice_end_before_window(self, budget: str, pool: Pool, gpus: int, slice_end: Seconds) -> Seconds:
        """The latest slice end this job may get on the pool: its requested end, or the start of the first window
        of another budget it would crowd out."""
        end = slice_end
        for w in self.by_pool.get(pool, ()):
            if w.budget == budget or w.start <= self.now or w.start >= end:
                continue
            if self.others_in_slice[w.id] + gpus > self.room(w):
                end = min(end, w.start)
        return end

    def window_lends_idle(self, budget: str, pool: Pool, gpus: int) -> bool:
        """True when a slice for this job keeps every open window on the pool whole (its GPUs free of others'
        slices); False means the job may use the pool now only as preemptible work."""
        for w in self.by_pool.get(pool, ()):
            if w.active(self.now) and w.budget != budget and self.others_in_slice[w.id] + gpus > self.room(w):
                return False
        return True

    def commit(self, budget: str, pool: Pool, gpus: int, slice_end: Seconds | None) -> None:
        """Count a slice granted in this cycle."""
        if slice_end is not None and pool in self.by_pool:
            self.version += 1
            self.pool_version[pool] += 1
            self._count(budget, pool, gpus, slice_end)

    def active_windows(self) -> list[CapacityWindow]:
        return [w for ws in self.by_pool.values() for w in ws if w.active(self.now)]
