"""What the simulator learns from each cycle's decisions about jobs that wait and GPUs that idle (issue 21's honest
measures).

Owns: the first estimated start each job was told when it was submitted (for the ETA error), which sessions were
ever told they wait on their own limit (their user's session count or size, or their budget's GPU limit) — those
are reported apart, since no scheduler can start them sooner without breaking the limit — and why each idle GPU is
idle after each decision (IdleWatch, a Policy wrapping the policy under test).

Must not: change what the engine decides, or read the store; it reads only each cycle's snapshot and Decisions.
"""

from __future__ import annotations

from collections.abc import Iterable

from allotment.core.decisions import Blocker, Decisions
from allotment.core.model import Seconds, Snapshot
from allotment.core.policy import Policy

OWN_LIMITS = frozenset({Blocker.SESSION_LIMIT, Blocker.LIMIT})


class WaitWatch:
    def __init__(self) -> None:
        self.first_eta: dict[str, Seconds] = {}
        """Job id → the estimated start in its first reason (jobs that started at once or got none are absent)."""
        self.own_limit: set[str] = set()
        """Sessions told at least once that they wait on their own limit."""
        self._new: list[str] = []
        self._sessions: set[str] = set()

    def submitted(self, job_ids: Iterable[str], sessions: Iterable[str]) -> None:
        """Jobs submitted at this instant, before the cycle that decides on them."""
        self._new.extend(job_ids)
        self._sessions.update(sessions)

    def saw(self, decisions: Decisions) -> None:
        """Read one cycle's decisions: the new jobs' first estimates, and the reasons of sessions still waiting."""
        pending = decisions.pending
        for jid in self._new:
            why = pending.get(jid)
            if why is not None and why.estimated_start is not None:
                self.first_eta[jid] = why.estimated_start
        self._new.clear()
        for s in decisions.starts:
            self._sessions.discard(s.job_id)
        for jid in self._sessions:
            why = pending.get(jid)
            if why is not None and why.blocker in OWN_LIMITS:
                self.own_limit.add(jid)


IDLE_CAUSES: tuple[tuple[str, str], ...] = (
    ("unavailable", "node not taking work"),
    ("claimed", "claimed by a reservation"),
    ("room", "session room"),
    ("too_big", "every waiting job needs more"),
    ("held", "a waiting job would fit"),
)
"""(key, meaning) of each cause of idle GPUs, in the order the report shows them (docs/simulation.md)."""

IdleSample = tuple[Seconds, tuple[int, ...]]
"""(instant, idle GPUs per cause in IDLE_CAUSES order) from that instant until the next sample."""


class IdleWatch:
    """A Policy that decides as the policy it wraps and records, after each decision, why the GPUs no run holds are
    idle (issue 21: where utilisation while contended goes).

    Each idle GPU has one cause, looked at in this order: its node takes no work (down, draining, cordoned); a
    reservation (a planned start, or GPUs freed by preemption) claims its node; it is part of the cluster's session
    room (the free GPUs on unclaimed nodes, up to the room's size, for policies that keep one); every waiting job
    that may run on the cluster needs more GPUs than the rest of its free GPUs; else some waiting job would fit their
    number but did not start (spread over nodes, its limit or funds, or a rule held it back). GPUs being freed by
    preemption still count as held, as they do in utilisation."""

    def __init__(self, inner: Policy, start: Seconds) -> None:
        self.inner = inner
        self.name: str = str(getattr(inner, "name", type(inner).__name__))
        self.keeps_room = bool(getattr(inner, "keeps_session_room", False))
        self.start = start
        self.samples: list[IdleSample] = []

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        decisions = self.inner.decide(snapshot, now)
        idle = idle_by_cause(snapshot, decisions, self.keeps_room)
        if not self.samples or self.samples[-1][1] != idle:
            self.samples.append((now - self.start, idle))
        return decisions


def idle_by_cause(snapshot: Snapshot, decisions: Decisions, keeps_room: bool) -> tuple[int, ...]:
    """Idle GPUs per cause (IDLE_CAUSES order) once the decisions' starts hold their GPUs."""
    held: dict[str, int] = {}
    started = set()
    for s in decisions.starts:
        started.add(s.job_id)
        for a in s.placement:
            held[a.node] = held.get(a.node, 0) + len(a.gpus)
    smallest: dict[tuple[str, str], int] = {}
    """(cluster, GPU type) → the fewest GPUs a waiting job that may run there needs."""
    pools = {(n.cluster, n.gpu_type) for n in snapshot.nodes}
    for job in snapshot.jobs:
        if job.run is not None:
            for a in job.run.placement:
                held[a.node] = held.get(a.node, 0) + len(a.gpus)
        elif job.id not in started and not job.cancel_requested:
            need = job.gpus * job.replicas
            for pool in pools:
                if (job.clusters and pool[0] not in job.clusters) or (job.gpu_types and pool[1] not in job.gpu_types):
                    continue
                if need < smallest.get(pool, need + 1):
                    smallest[pool] = need
    claimed = {name for r in decisions.reserves for name, _ in r.nodes}
    unavailable = claim = 0
    free: dict[tuple[str, str], int] = {}
    for node in snapshot.nodes:
        idle = max(node.gpus - held.get(node.name, 0), 0)
        if idle == 0:
            continue
        if not node.accepts_work:
            unavailable += idle
        elif node.name in claimed:
            claim += idle
        else:
            pool = (node.cluster, node.gpu_type)
            free[pool] = free.get(pool, 0) + idle
    room_left = dict(_rooms(snapshot)) if keeps_room else {}
    room = too_big = fits = 0
    for pool, idle in sorted(free.items()):
        kept = min(idle, room_left.get(pool[0], 0))
        if kept:
            room_left[pool[0]] -= kept
        room += kept
        rest = idle - kept
        if rest and smallest.get(pool, rest + 1) <= rest:
            fits += rest
        else:
            too_big += rest
    return (unavailable, claim, room, too_big, fits)


def _rooms(snapshot: Snapshot) -> dict[str, int]:
    out = {c.name: snapshot.policy.headroom_for(c.name) for c in snapshot.clusters}
    for cluster, room in snapshot.room.items():
        out[cluster] = room.gpus
    return out
