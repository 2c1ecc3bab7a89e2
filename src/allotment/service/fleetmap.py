"""The fleet as a map: every cluster with its nodes and session room, each node's GPUs in use, state, and for
draining nodes when they will be empty.

Owns: two queries for the whole fleet (nodes; open runs with their placements, slice ends, kill deadlines and
grace), so a fleet of hundreds of nodes is one cheap read, and the drain estimate of every draining node from that
one pass — the rule of service.nodes (each job leaves at its slice end plus its grace capped at max_grace, at its kill
deadline when already leaving, now plus grace when forced or without a slice; never later than now + max_slice +
max_grace), which tests hold equal to what `POST /nodes/{name}/drain` answered. Visible to every user, as
`GET /nodes` is.

Must not: change node states (service.nodes does) or write anything.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.changes.room import ROOM_KEY
from allotment.core.model import NodeState
from allotment.service.context import Context
from allotment.service.dashboard_views import FleetCluster, FleetMap, FleetNode
from allotment.service.principal import Principal
from allotment.service.views import SessionRoomView
from allotment.store.db import reading
from allotment.store.records import get_state
from allotment.store.tables import JobRow, NodeRow, RunRow


def session_rooms(session: Session) -> dict[str, SessionRoomView]:
    """Each cluster's session room as the engine's last cycle sized it and recorded it (changes.room)."""
    raw = get_state(session, ROOM_KEY)
    if not isinstance(raw, dict):
        return {}
    return {
        str(c): SessionRoomView(
            cluster=str(c),
            gpus=int(r.get("gpus", 0)),
            whole=int(r.get("whole", 0)),
            floor=int(r.get("floor", 0)),
            demand=int(r.get("demand", 0)),
            shape=int(r.get("shape", 0)),
            ceiling=int(r.get("ceiling", 0)),
        )
        for c, r in sorted(raw.items())
        if isinstance(r, dict)
    }


def _leaves_at(slice_end: int | None, kill_at: int | None, grace: int, now: int, forced: bool, max_grace: int) -> int:
    leave = min(grace, max_grace)
    if kill_at is not None:
        return kill_at
    if not forced and slice_end is not None and slice_end > now:
        return slice_end + leave
    return now + leave


def fleet_map(ctx: Context, principal: Principal, cluster: str | None = None) -> FleetMap:
    """Clusters (or one) with their nodes in name order: GPUs, GPUs in use, state, jobs, and drain estimates."""
    now = ctx.now()
    stmt = select(NodeRow).order_by(NodeRow.cluster, NodeRow.name)
    if cluster is not None:
        stmt = stmt.where(NodeRow.cluster == cluster)
    policy = ctx.policy
    cap = now + policy.max_slice + policy.max_grace
    with reading(ctx.sessions) as session:
        used: dict[str, int] = {}
        jobs: dict[str, set[str]] = {}
        leaving: dict[str, list[tuple[int | None, int | None, int]]] = {}
        for job_id, placement, slice_end, kill_at, grace in session.execute(
            select(RunRow.job_id, RunRow.placement, RunRow.slice_end, RunRow.kill_at, JobRow.grace)
            .join(JobRow, JobRow.id == RunRow.job_id)
            .where(RunRow.ended_at.is_(None))
        ):
            for allocation in placement:
                node = str(allocation["node"])
                used[node] = used.get(node, 0) + len(allocation["gpus"])
                jobs.setdefault(node, set()).add(job_id)
                leaving.setdefault(node, []).append((slice_end, kill_at, grace))
        rooms = session_rooms(session)
        clusters: dict[str, list[FleetNode]] = {}
        for row in session.scalars(stmt):
            empty_by = None
            if row.state == NodeState.DRAINING.value:
                ends = [_leaves_at(*run, now, row.forced, policy.max_grace) for run in leaving.get(row.name, [])]
                empty_by = min(max([now, *ends]), cap)
            clusters.setdefault(row.cluster, []).append(
                FleetNode(
                    name=row.name,
                    gpu_type=row.gpu_type,
                    gpus=row.gpus,
                    used_gpus=min(row.gpus, used.get(row.name, 0)),
                    state=row.state,
                    forced=row.forced,
                    reason=row.reason,
                    jobs=len(jobs.get(row.name, ())),
                    empty_by=empty_by,
                )
            )
    return FleetMap(
        now=now,
        clusters=[
            FleetCluster(
                name=name,
                gpus=sum(n.gpus for n in nodes),
                used_gpus=sum(n.used_gpus for n in nodes),
                nodes=nodes,
                room=rooms.get(name),
            )
            for name, nodes in sorted(clusters.items())
        ],
    )
