"""The session room is an invariant (rule `session-room`, issue 21): no start of any kind — a reservation start, a
backfill, a capacity window's claim, a guaranteed job's first slice — takes a cluster below its session room, unless
the work it starts leaves within the session grace (opportunistic work with a grace of at most
`headroom_max_grace`). Sessions themselves use the room. The room of a cluster is its free GPUs plus the GPUs of
running fast-leaving work, on ready nodes that no reservation claims: a claimed node's GPUs belong to its plan, and a
start there (the plan's own, or backfill that cannot delay it) leaves the room as it is."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given

from allotment.core.decisions import Decisions, Start
from allotment.core.model import JobKind, NodeState, RunClass, SessionRoom, Snapshot
from tests.core.strategies import DRIVEN, PROPERTY, Case, CheckedDriver, cases, decide, held_gpus
from tests.core.test_properties_conservation import quick


def _claimed(snap: Snapshot, d: Decisions) -> set[str]:
    """The nodes of carried reservations that stay claimed through the cycle (their job is reserved again); the
    others were released at the start of the cycle, or when their job started on them."""
    again = {r.job_id for r in d.reserves}
    return {name for r in snap.reservations if r.job_id in again for name, _ in r.nodes}


def _room_before(snap: Snapshot, claimed: set[str]) -> dict[str, int]:
    held = held_gpus(snap)
    ready = {n.name: n for n in snap.nodes if n.state is NodeState.READY and n.name not in claimed}
    room: dict[str, int] = {}
    for name, n in ready.items():
        room[n.cluster] = room.get(n.cluster, 0) + n.gpus - len(held[name])
    for j in snap.jobs:
        run = j.run
        if run is None or run.preemption is not None or run.slice_end is not None or not quick(snap, j):
            continue
        for a in run.placement:
            if a.node in ready:
                c = ready[a.node].cluster
                room[c] = room.get(c, 0) + len(a.gpus)
    return room


def _breaches(snap: Snapshot, d: Decisions) -> list[str]:
    """Starts of slow-leaving work that leave a cluster with less room than its session room. Taken in the cycle's
    order: reserved jobs first (a reservation start takes the plan's GPUs, which were never counted as room when the
    plan was made; a reserved job that fits elsewhere is held to the room), then sessions (which use the room), then
    the rest."""
    jobs = {j.id: j for j in snap.jobs}
    cluster_of = {n.name: n.cluster for n in snap.nodes}
    claimed = _claimed(snap, d)
    room, held = _room_before(snap, claimed), held_gpus(snap)
    for s in d.starts:  # GPUs work let go of within the cycle (killed at once) are free too
        for a in s.placement:
            if a.node not in claimed:
                room[cluster_of[a.node]] = room.get(cluster_of[a.node], 0) + len(held[a.node] & set(a.gpus))

    def fast(s: Start) -> bool:
        return s.run_class is RunClass.OPPORTUNISTIC and quick(snap, jobs[s.job_id])

    out: list[str] = []
    carried = {r.job_id for r in snap.reservations}
    first = [s for s in d.starts if s.job_id in carried]  # reserved jobs, on their GPUs or elsewhere
    sessions = [s for s in d.starts if s not in first and jobs[s.job_id].kind is JobKind.SESSION]
    rest = [s for s in d.starts if s not in first and s not in sessions]
    for s in first + sessions + rest:
        for a in s.placement:
            if a.node in claimed or s.backfill_for is not None or fast(s):
                continue  # backfill on a claimed node (a plan's GPUs, never room); work that leaves within seconds
            c = cluster_of[a.node]
            left = room.get(c, 0) - len(a.gpus)
            want = snap.room[c].gpus if c in snap.room else snap.policy.headroom_for(c)
            exempt = s.rule == "reservation" or jobs[s.job_id].kind is JobKind.SESSION
            if not exempt and left < want and len(a.gpus) > 0:
                out.append(f"{s.job_id} ({s.rule}) takes {len(a.gpus)} GPUs of {c}: {room.get(c, 0)} → {left} < {want}")
            room[c] = left
    return out


@PROPERTY
@given(cases())
def test_no_start_takes_a_cluster_below_its_session_room(case: Case) -> None:
    d = decide(case)
    assert not _breaches(case.snapshot, d)


@DRIVEN
@given(cases())
def test_over_many_cycles_no_start_takes_a_cluster_below_its_session_room(case: Case) -> None:
    drv = CheckedDriver(case.snapshot, case.durations, case.now)
    breaches: list[str] = []
    drv.hooks.append(lambda snap, _now, d: breaches.extend(_breaches(snap, d)))
    for _ in range(12):
        drv.step(drv.now + 300)
    assert not breaches


# -- the node-shaped room (rule `node-shaped-room`, decision 54) ---------------------------------------------------


def _with_whole_rooms(case: Case) -> Case:
    """The case with a whole-node room in every cluster (the largest node's GPUs), as the shell sizes it once a
    whole-node session was seen."""
    snap = case.snapshot
    largest: dict[str, int] = {}
    for n in snap.nodes:
        largest[n.cluster] = max(largest.get(n.cluster, 0), n.gpus)
    room = {c: SessionRoom(max(g, snap.policy.headroom_for(c)), g) for c, g in largest.items()}
    return replace(case, snapshot=replace(snap, room=room))


def _soon(snap: Snapshot, d: Decisions) -> tuple[dict[str, int], set[str]]:
    """Per ready node no reservation claims through the cycle (a carried plan kept, or a plan made in it): its GPUs
    free, held by fast-leaving work or by work leaving (told before or in this cycle); and the nodes left out as
    claimed."""
    carried = {r.job_id for r in snap.reservations}
    made = {n for r in d.reserves if r.job_id not in carried for n, _ in r.nodes}
    claimed = _claimed(snap, d) | made
    held = held_gpus(snap)
    soon = {
        n.name: n.gpus - len(held[n.name]) for n in snap.nodes if n.state is NodeState.READY and n.name not in claimed
    }
    told = {p.job_id for p in d.preempts}  # told to leave in this cycle: coming back, as room_deficit counts them
    for j in snap.jobs:
        run = j.run
        if run is None:
            continue
        fast = run.slice_end is None and quick(snap, j)
        for a in run.placement:
            if a.node in soon and (run.preemption is not None or fast or j.id in told):
                soon[a.node] += len(a.gpus)
    return soon, claimed


def _whole_breaches(snap: Snapshot, d: Decisions) -> list[str]:
    """Starts of slow-leaving work (not sessions, not reservation starts, not backfill on a claimed node) that take
    the last node of a cluster able to hold its room's whole-node session."""
    jobs = {j.id: j for j in snap.jobs}
    nodes = {n.name: n for n in snap.nodes}
    soon, _ = _soon(snap, d)
    held = held_gpus(snap)
    for s in d.starts:  # GPUs let go of within the cycle (killed at once) are free too
        for a in s.placement:
            if a.node in soon:
                soon[a.node] += len(held[a.node] & set(a.gpus))
    carried = {r.job_id for r in snap.reservations}
    first = [s for s in d.starts if s.job_id in carried]
    sessions = [s for s in d.starts if s not in first and jobs[s.job_id].kind is JobKind.SESSION]
    rest = [s for s in d.starts if s not in first and s not in sessions]
    out: list[str] = []

    def whole_nodes(cluster: str) -> list[str]:
        want = snap.room[cluster].whole
        return [n for n, g in soon.items() if nodes[n].cluster == cluster and g >= want]

    for s in first + sessions + rest:
        for a in s.placement:
            if a.node not in soon:
                continue
            fast = s.run_class is RunClass.OPPORTUNISTIC and quick(snap, jobs[s.job_id])
            if fast:
                continue  # work that leaves within seconds keeps its GPUs in the room, as it does already running
            c = nodes[a.node].cluster
            before = whole_nodes(c)
            soon[a.node] -= len(a.gpus)
            slow = s in rest and s.rule != "reservation" and s.backfill_for is None and not fast
            if slow and before and not whole_nodes(c):
                out.append(f"{s.job_id} ({s.rule}) takes {len(a.gpus)} GPUs of {a.node}, the last whole node")
    return out


@PROPERTY
@given(cases())
def test_no_start_of_slow_leaving_work_takes_the_last_whole_node_of_the_room(case: Case) -> None:
    case = _with_whole_rooms(case)
    d = decide(case)
    assert not _whole_breaches(case.snapshot, d)
    assert not _breaches(case.snapshot, d)


@DRIVEN
@given(cases())
def test_over_many_cycles_no_start_takes_the_last_whole_node_of_the_room(case: Case) -> None:
    case = _with_whole_rooms(case)
    drv = CheckedDriver(case.snapshot, case.durations, case.now)
    breaches: list[str] = []
    drv.hooks.append(lambda snap, _now, d: breaches.extend(_whole_breaches(snap, d)))
    for _ in range(12):
        drv.step(drv.now + 300)
    assert not breaches
