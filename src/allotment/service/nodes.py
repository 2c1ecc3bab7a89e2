"""Nodes: the fleet with each node's state and jobs, and the operator's actions on a node.

Owns: listing nodes with what runs on them; cordon (nothing new lands), drain (nothing new lands, preemptible work
leaves now, contracted work at its slice end; returns when the node will be empty: the latest of its jobs' slice ends,
or now, plus their grace, never later than now + max_slice + max_grace), resume, and the administrator's forced drain
(every job leaves now; the engine refunds their owners). Each change is written to the node with an audit record,
then the engine is woken to act on it.

Must not: preempt or refund anything itself (the engine does, in its next cycle).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.core.model import NodeState
from allotment.service.context import Context
from allotment.service.errors import Conflict, NotFound
from allotment.service.outlook import class_of
from allotment.service.principal import Principal
from allotment.service.views import DrainView, NodeJob, NodeView
from allotment.store.db import reading
from allotment.store.records import audit
from allotment.store.tables import JobRow, NodeRow, RunRow


def _jobs_by_node(session: Session) -> dict[str, list[NodeJob]]:
    out: dict[str, list[NodeJob]] = {}
    for run, job in session.execute(
        select(RunRow, JobRow).join(JobRow, JobRow.id == RunRow.job_id).where(RunRow.ended_at.is_(None))
    ).all():
        for allocation in run.placement:
            out.setdefault(str(allocation["node"]), []).append(
                NodeJob(
                    job_id=job.id,
                    user=job.user,
                    budget=job.budget,
                    gpus=len(allocation["gpus"]),
                    run_class=run.run_class,
                    slice_end=run.slice_end,
                    kill_at=run.kill_at,
                    began_as=class_of(run).began_as,
                )
            )
    return out


def _view(row: NodeRow, jobs: list[NodeJob]) -> NodeView:
    return NodeView(
        name=row.name,
        cluster=row.cluster,
        gpu_type=row.gpu_type,
        gpus=row.gpus,
        state=row.state,
        forced=row.forced,
        reason=row.reason,
        free_gpus=max(0, row.gpus - sum(j.gpus for j in jobs)),
        jobs=sorted(jobs, key=lambda j: j.job_id),
    )


def list_nodes(
    ctx: Context, principal: Principal, *, cluster: str | None = None, state: str | None = None
) -> list[NodeView]:
    stmt = select(NodeRow).order_by(NodeRow.name)
    if cluster is not None:
        stmt = stmt.where(NodeRow.cluster == cluster)
    if state is not None:
        stmt = stmt.where(NodeRow.state == state)
    with reading(ctx.sessions) as session:
        jobs = _jobs_by_node(session)
        return [_view(row, jobs.get(row.name, [])) for row in session.scalars(stmt)]


def get_node(ctx: Context, principal: Principal, name: str) -> NodeView:
    with reading(ctx.sessions) as session:
        row = session.get(NodeRow, name)
        if row is None:
            raise NotFound(f"no node {name!r}")
        return _view(row, _jobs_by_node(session).get(name, []))


def _empty_by(session: Session, ctx: Context, name: str, now: int, forced: bool) -> int:
    """When the node will be empty: each job leaves at its slice end (now if it has none, or when forced) plus its
    grace, or at its kill deadline when it is already leaving; capped at now + max_slice + max_grace."""
    policy = ctx.policy
    latest = now
    for run, grace in session.execute(
        select(RunRow, JobRow.grace).join(JobRow, JobRow.id == RunRow.job_id).where(RunRow.ended_at.is_(None))
    ).all():
        if all(str(a["node"]) != name for a in run.placement):
            continue
        leave = min(grace, policy.max_grace)
        if run.kill_at is not None:
            at = run.kill_at
        elif not forced and run.slice_end is not None and run.slice_end > now:
            at = run.slice_end + leave
        else:
            at = now + leave
        latest = max(latest, at)
    return min(latest, now + policy.max_slice + policy.max_grace)


def _change(
    ctx: Context, principal: Principal, name: str, state: NodeState, why: str, *, forced: bool = False
) -> DrainView:
    now = ctx.now()
    with ctx.sessions.begin() as session:
        row = session.get(NodeRow, name, with_for_update=True)
        if row is None:
            raise NotFound(f"no node {name!r}")
        if row.state == NodeState.DOWN.value and state is not NodeState.READY:
            raise Conflict(f"node {name} is down; resume it once it is back")
        before = {"state": row.state, "forced": row.forced}
        row.state, row.forced, row.updated_at = state.value, forced, now
        row.reason = (why or None) if state is not NodeState.READY else None
        action = {NodeState.READY: "node.resume", NodeState.CORDONED: "node.cordon"}.get(
            state, "node.force-drain" if forced else "node.drain"
        )
        empty = _empty_by(session, ctx, name, now, forced)
        audit(
            session,
            at=now,
            actor=principal.user,
            action=action,
            target=f"node:{name}",
            why=why,
            detail={"before": before, "after": {"state": state.value, "forced": forced}, "empty_by": empty},
        )
        view = _view(row, _jobs_by_node(session).get(name, []))
    ctx.notify()
    return DrainView(node=view, empty_by=empty)


def cordon(ctx: Context, principal: Principal, name: str, why: str = "") -> NodeView:
    principal.require_operator("cordon nodes")
    return _change(ctx, principal, name, NodeState.CORDONED, why).node


def drain(ctx: Context, principal: Principal, name: str, why: str = "") -> DrainView:
    principal.require_operator("drain nodes")
    return _change(ctx, principal, name, NodeState.DRAINING, why)


def force_drain(ctx: Context, principal: Principal, name: str, why: str = "") -> DrainView:
    """Every job leaves now (after its grace); the engine refunds the owners: an administrator's action."""
    principal.require_admin("force a drain")
    return _change(ctx, principal, name, NodeState.DRAINING, why, forced=True)


def resume(ctx: Context, principal: Principal, name: str, why: str = "") -> NodeView:
    principal.require_operator("resume nodes")
    return _change(ctx, principal, name, NodeState.READY, why).node
