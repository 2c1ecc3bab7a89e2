"""Finding room by preemption for the preempting baselines ("priority", "kueue"; docs/baselines.md).

Owns: the search for the nodes a pending job could hold once chosen running work leaves — per node, its free GPUs
(less those held for other preemptors this cycle), GPUs already leaving that no other job was promised, then
victims in the policy's order until the job fits (only work of the budgets the policy names as suspects is asked
about, when it names them); the choice of the node (or k whole nodes) that needs the fewest,
cheapest victims; and carrying the choice out (victims told to leave with their grace, the room promised to the
preemptor for the rest of the cycle, and in later cycles through a preemption reservation until it starts there).

Must not: decide which work is a victim or in what order (the policy passes `eligible` and `order`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from allotment.core.capacity import Occupant, Pool
from allotment.core.decisions import Blocker, PreemptReason, Reserve
from allotment.core.model import Job, ReservationKind, Seconds
from allotment.core.placement import Placement, node_size, nodes_needed
from allotment.policies.common import Frame


@dataclass(frozen=True, slots=True)
class Room:
    pool: Pool
    nodes: tuple[tuple[int, int], ...]
    """(node index, GPUs the job needs there)."""
    victims: tuple[Job, ...]


def find_room(
    frame: Frame,
    job: Job,
    eligible: Callable[[Job], bool],
    order: Callable[[Job], tuple[object, ...]],
    promised: dict[int, int],
    suspects: Callable[[Pool], Collection[str]] | None = None,
    lookout: Lookout | None = None,
) -> Room | None:
    """The nodes where the gang could start once the fewest, first-in-`order` eligible victims and the unpromised
    leaving work are gone; None when no choice of victims makes room.

    `suspects`, when given, names for a pool the budgets whose running work there `eligible` can accept at all (a
    necessary condition of it, so the answer is the same): other work is passed over without asking `eligible`, and
    a node whose suspects together hold too few GPUs is passed over without sorting them. With a `lookout` too, only
    the nodes that have free or leaving GPUs or hold suspects' work are visited: on any other node nothing can make
    room, which is what the visit would find."""
    cap = frame.cap
    for pool in frame.pools(job):
        size = node_size(cap, pool)
        k = nodes_needed(job, size)
        if k == 0:
            continue
        need = job.total_gpus if k == 1 else size
        budgets = None if suspects is None else suspects(pool)
        options: list[tuple[tuple[object, ...], int, list[Job]]] = []
        usable = frame.usable(job, pool, need)
        nodes = usable if budgets is None or lookout is None else lookout.within(usable, pool, budgets)
        for idx in nodes:
            slot = cap.nodes[idx]
            leaving = suspected = 0
            staying: list[Occupant] = []
            for o in slot.occupants:
                if o.leaving:
                    leaving += o.gpus
                elif o.job.run is not None and (budgets is None or o.job.budget in budgets):
                    staying.append(o)
                    suspected += o.gpus
            have = len(slot.free) - frame.held_free.get(idx, 0)
            if leaving:
                have += max(0, leaving - promised.get(idx, 0))
            victims: list[Job] = []
            if have < need:
                if have + suspected < need:
                    continue  # even every suspect leaving would not make room
                chosen = sorted((o for o in staying if eligible(o.job)), key=lambda o: order(o.job))
                for occ in chosen:
                    if have >= need:
                        break
                    victims.append(occ.job)
                    have += occ.gpus
                if have < need:
                    continue
            worst = max((order(v) for v in victims), default=())
            options.append(((len(victims), worst), idx, victims))
        if len(options) < k:
            continue
        options.sort(key=lambda o: (o[0], o[1]))
        picked = options[:k]
        seen: set[str] = set()
        victims_all: list[Job] = []
        for _, _, vs in picked:
            for v in vs:
                if v.id not in seen:
                    seen.add(v.id)
                    victims_all.append(v)
        return Room(pool, tuple(sorted((idx, need) for _, idx, _ in picked)), tuple(victims_all))
    return None


def take_room(
    frame: Frame, job: Job, room: Room, reason: PreemptReason, promised: dict[int, int], since: Seconds | None = None
) -> None:
    """Tell the victims to leave, promise the room to `job` for the rest of this cycle, and record the promise as a
    preemption reservation so that the next cycles keep the freed GPUs for it (kube-scheduler's nominated node)."""
    for victim in room.victims:
        frame.st.preempt(victim, reason, job.id)
        frame.ends[victim.id] = frame.now + frame.st.ix.grace(victim)
    _hold(frame, room, promised)
    names = tuple((frame.cap.nodes[i].node.name, g) for i, g in room.nodes)
    frame.st.out.mark_reserved(
        Reserve(job.id, names, ready_at(frame, room), ReservationKind.PREEMPTION, frame.now if since is None else since)
    )


def _hold(frame: Frame, room: Room, promised: dict[int, int]) -> None:
    for idx, need in room.nodes:
        slot = frame.cap.nodes[idx]
        free = len(slot.free) - frame.held_free.get(idx, 0)
        from_free = min(free, need)
        frame.held_free[idx] = frame.held_free.get(idx, 0) + from_free
        promised[idx] = promised.get(idx, 0) + (need - from_free)


def carry_rooms(frame: Frame, promised: dict[int, int], start: Callable[[Job, Placement], None]) -> dict[str, Room]:
    """Last cycles' preemption reservations whose job still waits and whose nodes can still hold it (free GPUs plus
    work leaving that nobody else was promised): the job starts there once the GPUs are free, else keeps them for
    this cycle. Returns the jobs handled (started or holding), with their rooms."""
    handled: dict[str, Room] = {}
    for res in sorted(frame.snap.reservations, key=lambda r: (r.planned_start, r.job_id)):
        job = frame.st.ix.jobs.get(res.job_id)
        if res.kind is not ReservationKind.PREEMPTION or job is None or job.run is not None or job.id in handled:
            continue
        slots = [frame.cap.slot(name) for name, _ in res.nodes]
        real = [s for s in slots if s is not None and s.accepts and frame.allowed(job, s)]
        if len(real) != len(slots) or len({s.pool for s in real}) != 1 or real[0].pool not in frame.pools(job):
            continue
        room = Room(real[0].pool, tuple((s.idx, g) for s, (_, g) in zip(real, res.nodes, strict=True)), ())
        free = {s.idx: len(s.free) - frame.held_free.get(s.idx, 0) for s in real}
        if all(free[i] >= g for i, g in room.nodes):
            start(job, Placement(room.pool, room.nodes))
            handled[job.id] = room
            continue
        leaving = {s.idx: sum(o.gpus for o in s.occupants if o.leaving) - promised.get(s.idx, 0) for s in real}
        if any(free[i] + max(0, leaving[i]) < g for i, g in room.nodes):
            continue  # the GPUs it was promised are gone (a node changed): it searches again
        _hold(frame, room, promised)
        frame.st.out.mark_reserved(
            Reserve(job.id, res.nodes, ready_at(frame, room), ReservationKind.PREEMPTION, res.since)
        )
        frame.wait(
            job,
            Blocker.WAITING_FOR_GRACE,
            f"GPUs on {', '.join(n for n, _ in res.nodes)} are being freed for it; the work there is leaving",
            ready_at(frame, room),
        )
        handled[job.id] = room
    return handled


class Lookout:
    """Where, in one cycle, a room search narrowed to suspects must look: nodes with free or leaving GPUs (a node
    without either has room only through victims), and the nodes holding each budget's running work. Both only
    grow within a cycle as far as they matter: free GPUs are never returned within a cycle, work is told to leave
    through the capacity (whose change log names the node), and work started in the cycle is never a victim."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self._open: dict[Pool, tuple[set[int], int]] = {}
        self._holding: dict[str, set[int]] | None = None
        self._sets: dict[int, tuple[list[int], frozenset[int]]] = {}
        self._within: dict[tuple[int, Pool, frozenset[str]], tuple[int, list[int], list[int]]] = {}

    def open(self, pool: Pool) -> set[int]:
        """Nodes of the pool with free or leaving GPUs, or changed since (a superset, kept up from the capacity's
        change log)."""
        cap = self.frame.cap
        log = cap.changes[pool]
        found = self._open.get(pool)
        if found is None:
            nodes = {i for i in cap.pools[pool] if cap.nodes[i].free or any(o.leaving for o in cap.nodes[i].occupants)}
        else:
            nodes, seen = found
            nodes.update(log[seen:])
        self._open[pool] = (nodes, len(log))
        return nodes

    def holding(self, budget: str) -> set[int]:
        """The nodes where the budget's running work sits (work started in this cycle is never a victim)."""
        if self._holding is None:
            self._holding = {}
            for slot in self.frame.cap.nodes:
                for o in slot.occupants:
                    if o.job.run is not None:
                        self._holding.setdefault(o.job.budget, set()).add(slot.idx)
        return self._holding.get(budget, set())

    def within(self, usable: list[int], pool: Pool, budgets: Collection[str]) -> list[int]:
        """The usable nodes worth a visit, in index order (the same list again until the pool's change log grows;
        the caller must not change it)."""
        names = budgets if isinstance(budgets, frozenset) else frozenset(budgets)
        key = (id(usable), pool, names)
        seen = len(self.frame.cap.changes[pool])
        known = self._within.get(key)
        if known is not None and known[0] == seen and known[1] is usable:
            return known[2]
        wanted = set(self.open(pool))
        for b in budgets:
            wanted |= self.holding(b)
        found = self._sets.get(id(usable))
        if found is None or found[0] is not usable:
            found = self._sets[id(usable)] = (usable, frozenset(usable))
        out = sorted(wanted & found[1])
        self._within[key] = (seen, usable, out)
        return out


class NoRoom:
    """Job shapes that found no room since the cycle's state last changed (GPUs taken or work told to leave): a
    later job of the same shape whose claim is no stronger finds none either, so the search is skipped."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self._seen: dict[tuple[object, ...], tuple[tuple[int, int], int]] = {}

    def _token(self) -> tuple[int, int]:
        return (self.frame.cap.version, len(self.frame.st.out.preempts))

    def known(self, key: tuple[object, ...], strength: int) -> bool:
        found = self._seen.get(key)
        return found is not None and found[0] == self._token() and strength <= found[1]

    def record(self, key: tuple[object, ...], strength: int) -> None:
        found = self._seen.get(key)
        token = self._token()
        if found is not None and found[0] == token:
            strength = max(strength, found[1])
        self._seen[key] = (token, strength)


def ready_at(frame: Frame, room: Room) -> Seconds:
    """When the room is free at the latest: the last kill deadline of the work leaving its nodes."""
    ends = [
        frame.ends.get(occ.job.id) or frame.now
        for idx, _ in room.nodes
        for occ in frame.cap.nodes[idx].occupants
        if occ.leaving
    ]
    return max(ends, default=frame.now)
