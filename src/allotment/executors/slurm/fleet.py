"""Fleet sync between Slurm and Allotment: Slurm's nodes read as core.model.Node, Allotment's drains written back.

Owns: reading every node from `sinfo --json` (name, GPU count and type from its Gres, CPUs and memory, state flags
and reason) and
mapping its state to NodeState; and `scontrol update NodeName=… State=DRAIN|RESUME|DOWN Reason=…` for the
decisions Allotment's operators make. The records and the action vocabulary are the FleetSource port's
(ports/fleet.py); this module only speaks Slurm.
Must not: decide which nodes to drain, or hold state of its own.

State mapping: DOWN, FUTURE, UNKNOWN, NOT_RESPONDING or POWERED_DOWN → DOWN; DRAIN (draining or drained) or
FAIL → DRAINING; everything else (idle, mixed, allocated, completing) → READY. Slurm has no separate "cordoned";
Allotment's CORDONED and DRAINING both become Slurm's DRAIN, which is exactly "nothing new lands, running work
stays". Right after a resume Slurm may show the node NOT_RESPONDING (so DOWN) for a second until its slurmd
registers again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from allotment.core.model import Node, NodeState
from allotment.executors.slurm.cli import SlurmCli, SlurmError, gres_gpu_count
from allotment.ports.fleet import DiscoveredNode, NodeAction

_DOWN = frozenset({"DOWN", "FUTURE", "UNKNOWN", "NOT_RESPONDING", "POWERED_DOWN", "POWER_DOWN", "INVALID"})
_DRAIN = frozenset({"DRAIN", "DRAINING", "DRAINED", "FAIL", "FAILING"})


def slurm_states(raw: Mapping[str, Any]) -> list[str]:
    """The base state and flags of one sinfo JSON node, upper case (both 22.05's and newer releases' formats)."""
    words: list[str] = []
    state = raw.get("state")
    for item in state if isinstance(state, list) else [state]:
        if isinstance(item, str) and item:
            words.append(item.upper())
    for flag in raw.get("state_flags") or []:
        if isinstance(flag, str):
            words.append(flag.upper())
    return words


def node_state(words: list[str]) -> NodeState:
    if any(w in _DOWN for w in words):
        return NodeState.DOWN
    if any(w in _DRAIN for w in words):
        return NodeState.DRAINING
    return NodeState.READY


def discover_nodes(cli: SlurmCli, cluster: str, gpu_type: str = "gpu") -> list[DiscoveredNode]:
    """Every Slurm node as a core Node of `cluster`. The GPU type is the Gres type when the Gres names one
    (`gpu:h100:8`), else `gpu_type`."""
    out: list[DiscoveredNode] = []
    for raw in cli.nodes():
        name = raw.get("name")
        if not isinstance(name, str):
            continue
        gpus, kind = gres_gpu_count(str(raw.get("gres") or ""))
        words = slurm_states(raw)
        reason = raw.get("reason")
        node = Node(
            name=name,
            cluster=cluster,
            gpu_type=kind or gpu_type,
            gpus=gpus,
            state=node_state(words),
            cpus=_count(raw.get("cpus")),
            memory=memory_of(raw),
        )
        out.append(
            DiscoveredNode(
                node=node,
                manager_state="+".join(words),
                reason=reason if isinstance(reason, str) and reason else None,
            )
        )
    return sorted(out, key=lambda d: d.node.name)


def _count(value: object) -> int:
    """A non-negative whole count from sinfo's JSON (newer releases wrap numbers as {"set", "number"}), else 0."""
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def memory_of(raw: Mapping[str, Any]) -> int:
    """The node's memory in MiB (Slurm's RealMemory, in its megabytes), or 0 when Slurm was not told it: its default
    RealMemory of 1 means "not configured", which Allotment reads as not declared (decision 60)."""
    mib = _count(raw.get("real_memory"))
    return mib if mib > 1 else 0


def set_node_state(cli: SlurmCli, node: str, action: NodeAction, reason: str = "allotment") -> None:
    """Drain, resume or down one Slurm node. DRAIN keeps running jobs; DOWN makes Slurm end them."""
    if action not in ("drain", "resume", "down"):
        raise ValueError(f"unknown node action {action!r}")
    args = ["update", f"NodeName={node}", f"State={action.upper()}"]
    if action != "resume":
        args.append(f"Reason={reason or 'allotment'}")
    try:
        cli.scontrol(*args)
    except SlurmError:
        # Slurm refuses to resume a node that is neither drained nor down: that is already the goal.
        if action == "resume" and not _needs_resume(cli, node):
            return
        raise


def _needs_resume(cli: SlurmCli, node: str) -> bool:
    for raw in cli.nodes():
        if raw.get("name") == node:
            return any(w in _DRAIN or w in ("DOWN", "FAIL") for w in slurm_states(raw))
    return True
