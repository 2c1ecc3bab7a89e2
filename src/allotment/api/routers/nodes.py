"""/nodes: list, show, cordon, drain (optionally forced), resume.

Owns: the HTTP shape of the node use cases. Must not: hold rules (service.nodes does).
"""

from __future__ import annotations

from fastapi import APIRouter

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.api.schemas import NodeAction
from allotment.service import nodes
from allotment.service.views import DrainView, NodeView

router = APIRouter(prefix="/nodes", tags=["nodes"], responses=ERROR_RESPONSES)


@router.get("", response_model=list[NodeView])
def list_nodes(ctx: Ctx, caller: Caller, cluster: str | None = None, state: str | None = None) -> list[NodeView]:
    return nodes.list_nodes(ctx, caller, cluster=cluster, state=state)


@router.get("/{name}", response_model=NodeView)
def get_node(name: str, ctx: Ctx, caller: Caller) -> NodeView:
    return nodes.get_node(ctx, caller, name)


@router.post("/{name}/cordon", response_model=NodeView)
def cordon(name: str, ctx: Ctx, caller: Caller, body: NodeAction | None = None) -> NodeView:
    """Nothing new lands on the node; what runs there stays."""
    return nodes.cordon(ctx, caller, name, body.why if body else "")


@router.post("/{name}/drain", response_model=DrainView)
def drain(name: str, ctx: Ctx, caller: Caller, body: NodeAction | None = None) -> DrainView:
    """Empty the node (returns when it will be empty). With `force`, every job leaves now and is refunded."""
    action = body or NodeAction()
    if action.force:
        return nodes.force_drain(ctx, caller, name, action.why)
    return nodes.drain(ctx, caller, name, action.why)


@router.post("/{name}/resume", response_model=NodeView)
def resume(name: str, ctx: Ctx, caller: Caller, body: NodeAction | None = None) -> NodeView:
    return nodes.resume(ctx, caller, name, body.why if body else "")
