"""Planned starts (rule `planned-start`, docs/policy.md §8): reservations built from known slice ends.

Owns: when a node could hold `need` GPUs (its occupants' leave times: slice end + grace for work inside a slice,
the kill deadline for work already leaving, now + grace for preemptible work), the choice of nodes and planned start
for a job that cannot start now (the earliest, then within `checkpoint_wait` the nodes and instant losing the least
work: `losing_least`), claims on reserved nodes, and the backfill test that keeps later work from delaying
a planned start (`backfill_cannot_delay`).

Must not: emit decisions or take GPUs; the cycle does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from allotment.core.capacity import Capacity, Claim, NodeSlot, Occupant, Pool, replicas_on
from allotment.core.checkpoints import Victim, keeps_rhythm, least_lost_start, lost_at, saving_starts
from allotment.core.decisions import PreemptReason
from allotment.core.model import Job, Seconds
from allotment.core.placement import asks_beside, choose_block, node_size, nodes_needed
from allotment.core.preemption import fewest_victims, lost_work

Yields = Callable[[Occupant], bool]
Bounds = Callable[[Pool, int, bool], Iterable[tuple[int, Seconds]]]
"""(pool, need, room counts) → (node index, earliest_on_node with everyone_yields, counting every or none of the
node's session-room GPUs) for the pool's accepting nodes with
at least `need` GPUs that could ever hold it, earliest first (ties by node index); claimed nodes may be left out."""


def everyone_yields(occ: Occupant) -> bool:
    return True


def nobody_yields(occ: Occupant) -> bool:
    """For a claim on GPUs being freed by preemption: only the victims (already leaving) free GPUs for it; the rest
    of the node's work stays, so it holds its GPUs past the start and leaves no spare room for backfill."""
    return False


def earliest_on_node(
    slot: NodeSlot,
    need: int,
    now: Seconds,
    yields: Yields = everyone_yields,
    room: int | None = None,
    beside: Job | None = None,
    soon: int | None = None,
) -> Seconds | None:
    """The earliest time `need` GPUs of this node could be free for one job, or None if it never could. Only work
    that is already leaving or that `yields` to the job counts as leaving; the rest may renew in its way. `room`,
    when given, is how many of the node's session-room GPUs count — those free now and those of fast-leaving work,
    which sessions take first (0 where the cluster's room binds: only GPUs freed later by other work count).
    `soon`, when given, bounds those and the GPUs of work already leaving together (Capacity.soon: on the room node,
    rule `node-shaped-room`). `beside`, the job when it asks for CPUs or memory: the time is also when the node's
    CPUs and memory could hold its replicas there (rule `cpus-and-memory-beside-gpus`)."""
    if slot.node.gpus < need:
        return None
    cpus_short = memory_short = 0
    if beside is not None:
        r = replicas_on(beside.gpus, need)
        cpus_short = r * beside.cpus - slot.cpus_free if beside.cpus > 0 else 0
        memory_short = r * beside.memory - slot.memory_free if beside.memory > 0 else 0
    # counting more room (or soon) GPUs than the job needs changes nothing
    soon_left = need if soon is None else soon
    room_left = min(soon_left, need if room is None else room)
    have = min(len(slot.free), room_left)
    room_left -= have
    soon_left -= have
    if have >= need and cpus_short <= 0 and memory_short <= 0:
        return now
    for occ in slot.by_leave():
        if not occ.leaving and not yields(occ):
            continue
        cpus_short -= occ.cpus
        memory_short -= occ.memory
        if occ.quick:
            counted = min(occ.gpus, room_left, soon_left)
            room_left -= counted
            soon_left -= counted
            have += counted
        elif occ.leaving:
            counted = min(occ.gpus, soon_left)
            soon_left -= counted
            have += counted
        else:
            have += occ.gpus
        if have >= need and cpus_short <= 0 and memory_short <= 0:
            return occ.leave
    return None


def planned_on(
    capacity: Capacity,
    nodes: Sequence[tuple[int, int]],
    now: Seconds,
    yields: Yields,
    wait: Seconds,
    grace: Callable[[Job], Seconds],
    beside: Job | None = None,
    promised: Seconds | None = None,
) -> Seconds:
    """When a reservation starts on its nodes: from the latest of their earliest_on_node times, the time within
    `wait` at which the work it calls away loses the least (rule `least-lost-work`) — but a plan already `promised`
    for a time is never delayed past it by that wait (promise 8), only by what truly holds its GPUs longer."""
    base = max((earliest_on_node(capacity.nodes[i], g, now, yields, None, beside) or now) for i, g in nodes)
    start = start_losing_least(capacity, nodes, base, now, yields, wait, grace)
    return start if promised is None or start <= promised else max(base, promised)


def start_losing_least(
    capacity: Capacity,
    nodes: Sequence[tuple[int, int]],
    base: Seconds,
    now: Seconds,
    yields: Yields,
    wait: Seconds,
    grace: Callable[[Job], Seconds],
) -> Seconds:
    """A new plan's start: from `base`, the earliest its nodes could hold it, the time within `wait` at which the
    work it calls away loses the least (rule `least-lost-work`)."""
    return least_lost_start(base, called_away(capacity, nodes, yields, grace), now, wait)


def called_away(
    capacity: Capacity, nodes: Sequence[tuple[int, int]], yields: Yields, grace: Callable[[Job], Seconds]
) -> list[Victim]:
    """The runs a planned start on these nodes would call away: the work there that gives way to it and is not
    leaving already, each job once with every GPU it holds."""
    seen: set[str] = set()
    out: list[Victim] = []
    for idx, _ in nodes:
        for occ in capacity.nodes[idx].occupants:
            run = occ.job.run
            if occ.leaving or run is None or occ.job.id in seen or not yields(occ):
                continue
            seen.add(occ.job.id)
            out.append((run, occ.job.total_gpus, grace(occ.job)))
    return out


class Plan:
    """A planned start: the nodes (index, GPUs) of one pool a job will start on, when, and the earliest its pool
    could have held it (`earliest`; the start is later by a wait on checkpoints) (a plain class: core performance
    rules, 1)."""

    __slots__ = ("earliest", "nodes", "planned_start", "pool")

    def __init__(
        self, pool: Pool, nodes: tuple[tuple[int, int], ...], planned_start: Seconds, earliest: Seconds | None = None
    ) -> None:
        self.pool: Final = pool
        self.nodes: Final = nodes
        self.planned_start: Final = planned_start
        self.earliest: Final = planned_start if earliest is None else earliest


def plan_start(
    job: Job,
    pools: Sequence[Pool],
    capacity: Capacity,
    topology: Mapping[str, tuple[str, ...]],
    now: Seconds,
    yields: Yields = everyone_yields,
    room_spare: Callable[[str, int], int | None] = lambda cluster, gpus: None,
    bounds: Bounds | None = None,
    headroom: Callable[[str], int] | None = None,
    room_node: Callable[[str], tuple[int, int] | None] = lambda cluster: None,
    wait: Seconds = 0,
    grace: Callable[[Job], Seconds] | None = None,
) -> Plan | None:
    """The earliest planned start over the job's pools, on nodes no other reservation claims; ties go to the pool
    the job prefers. With a `wait` and the victims' `grace`, the plan then takes, in that pool, the nodes and the
    start within `wait` of the earliest at which the work it calls away loses the least (rule `least-lost-work`:
    `losing_least`). `room_node` names a cluster's room node and the most of its GPUs free, held by fast-leaving
    work or by work already leaving that a plan may count there (rule `node-shaped-room`), which also bounds the
    cluster's spare there. `bounds`, when given, lists a pool's nodes in order of the earliest time they could hold
    a need if all their occupants gave way (earliest_on_node with everyone_yields): a single-node job then looks
    only at the nodes whose bound is not later than the best start found so far."""
    best: Plan | None = None
    times: dict[int, Seconds]
    for pool in pools:
        k, need = _nodes_and_need(job, capacity, pool)
        if k == 0 or (headroom is not None and _beyond_room(capacity, pool, need * k, headroom)):
            continue
        spare = room_spare(pool[0], need * k)
        if k > 1 and spare is not None:
            spare //= k  # a gang counts room GPUs on each of its k nodes: together at most the spare
        kept = room_node(pool[0])
        beside = job if asks_beside(job) else None
        if k == 1 and bounds is not None:
            searched = wait if grace is not None else 0
            single, times = _earliest_single(capacity, pool, need, now, yields, bounds, spare, kept, beside, searched)
            if single is not None and (best is None or single.planned_start < best.earliest):
                best = single
                if searched > 0 and grace is not None:
                    best = losing_least(
                        capacity, pool, times, 1, need, (), single.planned_start, now, yields, wait, grace
                    )
            continue
        cands: list[tuple[int, float]] = []
        times = {}
        for idx in capacity.pools.get(pool, ()):
            slot = capacity.nodes[idx]
            if not slot.accepts or slot.claim is not None or slot.node.gpus < need:
                continue
            t = earliest_on_node(slot, need, now, yields, spare, beside, _soon_on(idx, kept))
            if t is not None:
                times[idx] = t
                cands.append((idx, (t - now) + _tie(work_called_away(slot, need, now, yields))))
        if len(cands) < k:
            continue
        levels = topology.get(pool[0], ()) if k > 1 else ()
        if k == 1:
            # earliest, then the least work called away, then the fullest node (best fit), then index
            idx, _ = min(cands, key=lambda c: (c[1], len(capacity.nodes[c[0]].free), c[0]))
            plan = Plan(pool, ((idx, need),), times[idx])
        else:
            chosen = choose_block(cands, k, capacity, levels, by_kth=True)
            if chosen is None:
                continue
            plan = Plan(pool, tuple((i, need) for i in chosen), max(times[i] for i in chosen))
        if best is None or plan.planned_start < best.earliest:
            best = plan
            if wait > 0 and grace is not None:
                best = losing_least(
                    capacity, pool, times, k, need, levels, plan.planned_start, now, yields, wait, grace
                )
    return best


def losing_least(
    capacity: Capacity,
    pool: Pool,
    times: Mapping[int, Seconds],
    k: int,
    need: int,
    levels: tuple[str, ...],
    base: Seconds,
    now: Seconds,
    yields: Yields,
    wait: Seconds,
    grace: Callable[[Job], Seconds],
) -> Plan:
    """Rule `least-lost-work` for a new plan: of the nodes that could hold `need` GPUs each by `times` (`base`, the
    earliest k of them could, at the latest) and the instants in [base, base + wait] — each node's time and just
    after a predicted checkpoint of the work there (`saving_starts`) — the k nodes and the instant at which the
    work called away loses the fewest GPU-seconds, then the earliest. A node ready after `base` is a candidate
    only when work there keeps a checkpoint rhythm: what reports none loses only more by a later start, and the
    nodes ready at `base` already offer the least of it. At each instant a gang takes the tightest topology level
    that has k nodes ready by then, in it the group losing the least: never a looser level than the earliest
    plan's, as more nodes are ready later, not fewer."""
    window = {
        i: t for i, t in times.items() if t <= base or (t <= base + wait and _rhythm_on(capacity.nodes[i], now, yields))
    }
    victims = {i: _victims_on(capacity.nodes[i], need, now, yields, grace) for i in window}
    starts = {base}
    for i, t in window.items():
        starts.add(max(t, base))
        for run, _gpus, g in victims[i]:
            starts.update(saving_starts(run, g, max(t, base), base + wait, now))
    best: tuple[tuple[int, Seconds], list[int]] | None = None
    for t in sorted(starts):
        costs = [(i, float(lost_at(victims[i], t, now))) for i, ready in window.items() if ready <= t]
        if len(costs) < k:
            continue
        if k == 1:
            idx, cost = min(costs, key=lambda c: (c[1], len(capacity.nodes[c[0]].free), c[0]))
            chosen, loss = [idx], int(cost)
        else:
            block = choose_block(costs, k, capacity, levels, tightest=True)
            if block is None:
                continue
            chosen, loss = block, lost_at(called_away(capacity, [(i, need) for i in block], yields, grace), t, now)
        if best is None or (loss, t) < best[0]:
            best = ((loss, t), chosen)
            if loss == 0:
                break  # later instants can only tie, and ties go to the earliest
    assert best is not None  # at `base`, k nodes are ready: the earliest plan's
    return Plan(pool, tuple((i, need) for i in sorted(best[1])), best[0][1], base)


def _victims_on(
    slot: NodeSlot, need: int, now: Seconds, yields: Yields, grace: Callable[[Job], Seconds]
) -> list[Victim]:
    """The runs a plan for `need` GPUs of this node would call away: on a whole node, all the work there that gives
    way and is not leaving already; on part of one, none when the free GPUs and the work already leaving cover the
    need, else the fewest of the work that gives way that cover the rest (fewest_victims). Each with every GPU its
    job holds (a gang loses its replicas on other nodes too)."""
    have = len(slot.free)
    eligible: list[tuple[Occupant, PreemptReason]] = []
    for occ in slot.occupants:
        if occ.leaving:
            have += occ.gpus
        elif occ.job.run is not None and yields(occ):
            eligible.append((occ, PreemptReason.RESERVATION))
    if have >= need:
        return []
    chosen = eligible if need >= slot.node.gpus else fewest_victims(eligible, need - have, now)
    out: list[Victim] = []
    for occ, _ in chosen:
        run = occ.job.run
        if run is not None:
            out.append((run, occ.job.total_gpus, grace(occ.job)))
    return out


def _rhythm_on(slot: NodeSlot, now: Seconds, yields: Yields) -> bool:
    """Whether work on this node that would give way to a plan keeps a checkpoint rhythm (keeps_rhythm)."""
    return any(not o.leaving and keeps_rhythm(o.job.run, now) and yields(o) for o in slot.occupants)


def claimable(capacity: Capacity, cluster: str, headroom: int) -> int:
    """Rule `plans-leave-session-room`: the most GPUs a new planned start may claim in a cluster. Sessions and the
    headroom refill work only on nodes no plan claims, so plans leave the cluster's session headroom unclaimed —
    except the first plan there, which may claim any part of it (a gang larger than the cluster less its headroom
    must still get a planned start). Carried plans keep what they claimed."""
    unclaimed = capacity.unclaimed.get(cluster, 0)
    if headroom <= 0 or capacity.claimed_nodes.get(cluster, 0) == 0:
        return unclaimed
    return unclaimed - headroom


def room_denied(job: Job, pools: Sequence[Pool], capacity: Capacity, headroom: Callable[[str], int]) -> bool:
    """Whether `plans-leave-session-room` kept plan_start off one of the job's pools (for the job's wait reason)."""
    for pool in pools:
        k, need = _nodes_and_need(job, capacity, pool)
        if k > 0 and _beyond_room(capacity, pool, need * k, headroom):
            return True
    return False


def _nodes_and_need(job: Job, capacity: Capacity, pool: Pool) -> tuple[int, int]:
    """(nodes the job needs on the pool, GPUs on each): its own count on one node, or whole nodes for a gang."""
    size = node_size(capacity, pool)
    k = nodes_needed(job, size)
    return k, (job.total_gpus if k == 1 else size)


def _beyond_room(capacity: Capacity, pool: Pool, gpus: int, headroom: Callable[[str], int]) -> bool:
    return gpus > claimable(capacity, pool[0], headroom(pool[0]))


def _earliest_single(
    capacity: Capacity,
    pool: Pool,
    need: int,
    now: Seconds,
    yields: Yields,
    bounds: Bounds,
    spare: int | None,
    kept: tuple[int, int] | None = None,
    beside: Job | None = None,
    wait: Seconds = 0,
) -> tuple[Plan | None, dict[int, Seconds]]:
    """plan_start for a single-node job on one pool: the earliest start, then the least work called away (rule
    `least-lost-work`), then the fullest node, then the index — and, for losing_least, when that node and each node
    where work keeps a checkpoint rhythm could hold the job, up to `wait` after that start (the others lose more
    than the earliest node did at its start, which already broke ties by the work called away)."""
    best: tuple[Seconds, int, int, int] | None = None
    rhythm: dict[int, Seconds] = {}
    for idx, bound in bounds(pool, need, spare != 0):  # counting every room GPU bounds any spare from below
        if best is not None and bound > best[0] + wait:
            break  # this node and all after it could start no earlier, nor within the wait
        slot = capacity.nodes[idx]
        if slot.claim is not None:
            continue
        keeps = wait > 0 and _rhythm_on(slot, now, yields)
        if best is not None and bound > best[0] and not keeps:
            continue
        t = earliest_on_node(slot, need, now, yields, spare, beside, _soon_on(idx, kept))
        if t is None:
            continue
        if keeps:
            rhythm[idx] = t
        if best is not None and t > best[0]:
            continue
        key = (t, work_called_away(slot, need, now, yields), len(slot.free), idx)
        if best is None or key < best:
            best = key
    if best is None:
        return None, {}
    times = {i: t for i, t in rhythm.items() if t <= best[0] + wait}
    times[best[3]] = best[0]
    return Plan(pool, ((best[3], need),), best[0]), times


def work_called_away(slot: NodeSlot, need: int, now: Seconds, yields: Yields) -> int:
    """Rule `least-lost-work`: the GPU-seconds of work a planned start that takes `need` GPUs of this node now would
    cost — of the preemptible work that gives way, the victims `fewest_victims` would choose once the free GPUs,
    the work already leaving and the slice work that gives way are counted, each losing `lost_work` on every GPU of
    its job (a gang loses its replicas on other nodes too). Slice work is counted as losing nothing: what it will
    have saved by its slice end is not known now."""
    have = len(slot.free)
    eligible: list[tuple[Occupant, PreemptReason]] = []
    for occ in slot.occupants:
        if occ.leaving:
            have += occ.gpus
        elif yields(occ):
            if occ.preemptible:
                eligible.append((occ, PreemptReason.RESERVATION))
            else:
                have += occ.gpus
    if have >= need:
        return 0
    return sum(o.job.total_gpus * lost_work(o, now) for o, _ in fewest_victims(eligible, need - have, now))


def _tie(lost: int) -> float:
    """A fraction that orders candidate nodes by the work they would call away without changing the order of their
    times (whole seconds)."""
    return lost / (lost + 1_000_000.0)


def _soon_on(idx: int, kept: tuple[int, int] | None) -> int | None:
    """The GPUs a plan may count on node `idx` among those free, held by fast-leaving work or by work already
    leaving: on the cluster's room node, only what it holds beyond a whole-node session (rule `node-shaped-room`;
    otherwise the plan, made for now, would take the room node the next cycle as a reservation start)."""
    return kept[1] if kept is not None and kept[0] == idx else None


def claim(
    capacity: Capacity,
    job_id: str,
    nodes: Sequence[tuple[int, int]],
    planned_start: Seconds,
    yields: Yields,
) -> None:
    """Hold the nodes for a planned start. `spare` is what others may still hold past the start on each node: the
    GPUs of work that does not give way, and of work that cannot be gone by then (slice work whose slice ends too
    late, preemptible work whose notice would end too late)."""
    for idx, need in nodes:
        slot = capacity.nodes[idx]
        held_past = sum(o.gpus for o in slot.occupants if (not o.leaving and not yields(o)) or o.leave > planned_start)
        capacity.set_claim(idx, Claim(job_id, need, planned_start, max(0, slot.node.gpus - need - held_past), yields))


@dataclass(frozen=True, slots=True)
class Capped:
    """A verdict of the backfill rules: the job may go ahead only with its slice ending at `end`. (A distinct type,
    not a bare int beside True and False: type checkers fold `int | bool` into `int`, and compiled code then reads
    True as 1.)"""

    end: Seconds


def backfill_cannot_delay(
    slot: NodeSlot,
    gpus: int,
    holds_until: Seconds | None,
    grace: Seconds,
    min_slice: Seconds,
    now: Seconds,
    beside: bool = False,
) -> Capped | bool:
    """May a job take `gpus` GPUs of this node without delaying the node's planned start?

    Returns True when it may as asked (no claim; preemptible work when the planned start is at least `min_slice` + grace
    away, so it is worth starting; work that leaves in time; or spare room), Capped(end) when it may only with its
    slice ending early enough (at least `min_slice` long), or False. Spare room is GPUs only: work that asks for CPUs
    or memory (`beside`) never holds a claimed node past its planned start, whose CPUs and memory the plan counts on."""
    c = slot.claim
    if c is None:
        return True
    if holds_until is None:
        # preemptible work must be worth starting and still be told to leave in time: at least `min_slice` of work,
        # then its grace, before the planned start (otherwise re-placed victims would push the plan back each cycle)
        return c.planned_start - now >= min_slice + grace
    if holds_until + grace <= c.planned_start:
        return True
    if c.spare >= gpus and not beside:
        return True
    capped = c.planned_start - grace
    if capped - now >= min_slice:
        return Capped(capped)
    return False


def use_spare(slot: NodeSlot, gpus: int, holds_until: Seconds | None, grace: Seconds) -> None:
    """Record that a job now holds `gpus` GPUs of a claimed node past its planned start."""
    c = slot.claim
    if c is not None and holds_until is not None and holds_until + grace > c.planned_start:
        c.spare = max(0, c.spare - gpus)


def renewal_cannot_delay(
    slot: NodeSlot, occ: Occupant, holds_until: Seconds, grace: Seconds, min_slice: Seconds, now: Seconds
) -> Capped | bool:
    """The backfill test for a running job renewing its slice: work that does not yield to the node's planned start
    was never counted on, so it may renew; work that yields must fit the spare room or end in time."""
    c = slot.claim
    if c is None or not c.yields(occ):
        return True
    return backfill_cannot_delay(slot, occ.gpus, holds_until, grace, min_slice, now, occ.cpus > 0 or occ.memory > 0)


def use_spare_renewal(slot: NodeSlot, occ: Occupant, holds_until: Seconds, grace: Seconds) -> None:
    c = slot.claim
    if c is not None and c.yields(occ):
        use_spare(slot, occ.gpus, holds_until, grace)
