"""Sizing each cluster's session room from recent session demand (rule `adaptive-room`, docs/policy.md §4).

Owns: the running statistic of session demand the engine keeps in its state (`session_demand`: per cluster, the
seconds spent at each level of concurrent session GPUs and the largest session shape, in buckets over a trailing
window, so a restart forgets nothing), how one cycle's snapshot adds to it, and the room it gives each cluster: the
configured floor, raised to the window's quantile of concurrent session GPUs (time-weighted) and to the largest
recent session's GPUs on one node, capped by the ceiling. The engine passes the result to the core in
`Snapshot.room` and records it (`session_room`) for the views, `/metrics` and `allot why`.

Must not: read a clock or rows (the engine passes `now`, the snapshot and the memo), or decide anything the core
decides: the core only reads the sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from allotment.core.model import JobKind, PolicyConfig, Seconds, SessionRoom, Snapshot
from allotment.core.placement import allows, pool_preference

DEMAND_KEY = "session_demand"
ROOM_KEY = "session_room"
BUCKETS = 24
"""The window is kept in this many buckets (an hour each for the default day)."""

Sample = dict[str, tuple[int, int]]
"""Per cluster: (concurrent session GPUs, the largest session's GPUs on one node)."""


@dataclass(frozen=True, slots=True)
class RoomSize:
    """One cluster's room and where it came from (what the views, /metrics and `allot why` show)."""

    cluster: str
    gpus: int
    whole: int
    floor: int
    demand: int
    """The window's quantile of concurrent session GPUs."""
    shape: int
    """The largest session's GPUs on one node in the window."""
    ceiling: int

    def as_json(self) -> dict[str, int]:
        return {
            "gpus": self.gpus,
            "whole": self.whole,
            "floor": self.floor,
            "demand": self.demand,
            "shape": self.shape,
            "ceiling": self.ceiling,
        }


def demand_sample(snap: Snapshot) -> Sample:
    """Session demand as of the snapshot, per cluster: GPUs held by running sessions there, plus pending sessions
    within their owner's session count, each counted once, on the cluster of the pool it prefers (rule
    `room-where-sessions-start`: placement.pool_preference, the order it would be placed in), and the largest
    session's GPUs on one node. Counted on every cluster it may run on, a session that may run anywhere made every
    cluster keep room for it, while it starts in one."""
    cluster_of = {n.name: n.cluster for n in snap.nodes}
    pools = sorted({(n.cluster, n.gpu_type) for n in snap.nodes})
    gpus: dict[str, int] = {c.name: 0 for c in snap.clusters}
    shape: dict[str, int] = {c.name: 0 for c in snap.clusters}
    running: dict[str, int] = {}
    for job in snap.jobs:
        if job.kind is JobKind.SESSION and job.run is not None:
            running[job.user] = running.get(job.user, 0) + 1
            for alloc in job.run.placement:
                c = cluster_of.get(alloc.node)
                if c is not None:
                    gpus[c] = gpus.get(c, 0) + len(alloc.gpus)
                    shape[c] = max(shape.get(c, 0), len(alloc.gpus))
    pol = snap.policy
    for job in snap.jobs:
        if job.kind is not JobKind.SESSION or job.run is not None or job.cancel_requested:
            continue
        if running.get(job.user, 0) >= pol.session_max_per_user or job.total_gpus > pol.session_max_gpus:
            continue  # waiting on its own limit: not demand the room could serve
        allowed = [p for p in pools if allows(job, p)]
        if allowed:
            c = min(allowed, key=pool_preference(job, snap.rates))[0]
            gpus[c] = gpus.get(c, 0) + job.total_gpus
            shape[c] = max(shape.get(c, 0), job.gpus)
    return {c: (gpus[c], shape[c]) for c in sorted(gpus)}


def _bucket_length(window: Seconds) -> Seconds:
    return max(60, window // BUCKETS)


def advance(memo: object, sample: Sample, now: Seconds, window: Seconds) -> dict[str, object]:
    """The statistic after this cycle: the time since the last cycle added at the level sampled then, this sample's
    shape counted in its bucket, buckets older than the window dropped. `memo` is what the engine state held (None
    at first; anything unreadable starts afresh). JSON of lists only, so every store keeps it alike."""
    old = memo if isinstance(memo, dict) else {}
    at = old.get("at")
    raw_last = old.get("last")
    last: dict[str, object] = raw_last if isinstance(raw_last, dict) else {}
    length = _bucket_length(window)
    horizon = now - window
    buckets: dict[str, dict[int, tuple[dict[int, int], int]]] = {}
    raw = old.get("buckets")
    for c, rows in raw.items() if isinstance(raw, dict) else ():
        kept: dict[int, tuple[dict[int, int], int]] = {}
        for start, levels, top in rows:
            if int(start) + length > horizon:
                kept[int(start)] = ({int(g): int(s) for g, s in levels}, int(top))
        buckets[str(c)] = kept

    def add(c: str, t: Seconds, level: int, seconds: int, top: int) -> None:
        start = t - t % length
        if start + length <= horizon:
            return
        levels, best = buckets.setdefault(c, {}).get(start, ({}, 0))
        if seconds > 0:
            levels[level] = levels.get(level, 0) + seconds
        buckets[c][start] = (levels, max(best, top))

    if isinstance(at, int) and now > at:
        for c, pair in last.items():
            if isinstance(pair, list) and pair:
                add(str(c), at, int(pair[0]), min(now - at, window), 0)
    for c, (level, top) in sample.items():
        add(c, now, level, 0, top)
    return {
        "at": now,
        "last": {c: [level, top] for c, (level, top) in sample.items()},
        "buckets": {
            c: [
                [start, sorted([g, s] for g, s in levels.items()), top] for start, (levels, top) in sorted(rows.items())
            ]
            for c, rows in sorted(buckets.items())
        },
    }


def _quantile(levels: Mapping[int, int], per_mille: int) -> int:
    """The smallest level at or above which the given share of the time was spent (time-weighted quantile)."""
    total = sum(levels.values())
    if total <= 0:
        return 0
    seen = 0
    for level in sorted(levels):
        seen += levels[level]
        if seen * 1000 >= total * per_mille:
            return level
    return max(levels)


def room_sizes(memo: Mapping[str, object], snap: Snapshot) -> dict[str, RoomSize]:
    """Each cluster's room from the statistic (`advance`'s result) under the snapshot's policy: max(floor, demand,
    whole) capped by the ceiling, where demand is the window's quantile of concurrent session GPUs and whole the
    largest recent session's GPUs on one node (at most a node, only for sessions of two GPUs or more)."""
    pol: PolicyConfig = snap.policy
    largest: dict[str, int] = {}
    for n in snap.nodes:
        largest[n.cluster] = max(largest.get(n.cluster, 0), n.gpus)
    raw = memo.get("buckets")
    rows_of = raw if isinstance(raw, dict) else {}
    out: dict[str, RoomSize] = {}
    for cluster in sorted(c.name for c in snap.clusters):
        floor, ceiling = pol.headroom_for(cluster), pol.ceiling_for(cluster)
        levels: dict[int, int] = {}
        shape = 0
        if pol.room_window > 0:
            for _, pairs, top in rows_of.get(cluster, ()):
                for g, s in pairs:
                    levels[int(g)] = levels.get(int(g), 0) + int(s)
                shape = max(shape, int(top))
        demand = _quantile(levels, pol.room_quantile)
        whole = min(shape, largest.get(cluster, 0)) if pol.room_whole_node and shape >= 2 else 0
        gpus = min(ceiling, max(floor, demand, whole))
        out[cluster] = RoomSize(cluster, gpus, min(whole, gpus), floor, demand, shape, ceiling)
    return out


def with_rooms(snap: Snapshot, sizes: Mapping[str, RoomSize]) -> Snapshot:
    """The snapshot the core decides on: each cluster's room as sized."""
    return replace(snap, room={c: SessionRoom(r.gpus, r.whole) for c, r in sizes.items()})


def rooms_json(sizes: Mapping[str, RoomSize]) -> dict[str, dict[str, int]]:
    return {c: r.as_json() for c, r in sorted(sizes.items())}
