"""The session room is an invariant (rule `session-room`, issue 21): no start of any kind — a reservation start, a
backfill, a capacity window's claim, a guaranteed job's first slice — takes a cluster below its session room, unless
the work it starts leaves within the session grace (opportunistic work with a grace of at most
`headroom_max_grace`). Sessions themselves use the room. The room of a cluster is its free GPUs plus the GPUs of
running fast-leaving work, on ready nodes that no reservation claims: a claimed node's GPUs belong to its plan, and a
start there (the plan's own, or backfill that cannot delay it) leaves the room as it is."""

from __future__ import annotations

from hypothesis import given

from allotment.core.decisions import Decisions, Start
from allotment.core.model import JobKind, NodeState, RunClass, Snapshot
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
            want = snap.policy.headroom_for(c)
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
