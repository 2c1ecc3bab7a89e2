"""Expansion of the configured fleet into concrete nodes.

Owns: node naming (`<prefix>-<index>`, zero-padded to four digits, e.g. `jupiter-b200-0042`), rack and block
labels (racks and blocks are numbered per cluster, continuing across its node groups, so two groups never
share a rack), and applying per-node state overrides.

Must not: validate references or report problems (see `checks`); it assumes a configuration that passed them,
and tolerates anything else without crashing.
"""

from __future__ import annotations

from dataclasses import dataclass

from allotment.config.schema import ClusterConfig, NodeGroup, OverrideState
from allotment.core.model import Node, NodeState

_STATES = {
    OverrideState.CORDONED: NodeState.CORDONED,
    OverrideState.DRAINING: NodeState.DRAINING,
    OverrideState.DOWN: NodeState.DOWN,
}


def default_prefix(cluster: str, group: NodeGroup) -> str:
    return group.prefix if group.prefix is not None else f"{cluster}-{group.gpu_type.lower()}"


@dataclass(frozen=True, slots=True)
class PlannedNode:
    """A node as the configuration describes it, with the index of the node group it came from."""

    group: int
    node: Node


def plan_cluster(cluster: ClusterConfig) -> list[PlannedNode]:
    """Every node of the cluster, in node-group order, with its labels and state."""
    overrides = {o.node: o for o in cluster.node_states}
    planned: list[PlannedNode] = []
    rack_base = 0
    block_base = 0
    for index, group in enumerate(cluster.node_groups):
        prefix = default_prefix(cluster.name, group)
        width = max(4, len(str(group.count - 1)))
        racks_used = 0
        blocks_used = 0
        for i in range(group.count):
            labels: list[tuple[str, str]] = []
            if "rack" in cluster.topology and group.rack_size:
                rack = i // group.rack_size
                racks_used = rack + 1
                labels.append(("rack", f"r{rack_base + rack:03d}"))
                if "block" in cluster.topology and group.block_size:
                    block = rack // group.block_size
                    blocks_used = block + 1
                    labels.append(("block", f"b{block_base + block:02d}"))
            name = f"{prefix}-{i:0{width}d}"
            override = overrides.get(name)
            node = Node(
                name=name,
                cluster=cluster.name,
                gpu_type=group.gpu_type,
                gpus=group.gpus_per_node,
                labels=tuple(labels),
                state=_STATES[override.state] if override is not None else NodeState.READY,
                forced=override.forced if override is not None else False,
                cpus=group.cpus_per_node,
                memory=group.memory_per_node,
            )
            planned.append(PlannedNode(index, node))
        rack_base += racks_used
        block_base += blocks_used
    return planned


def expand_cluster(cluster: ClusterConfig) -> tuple[Node, ...]:
    return tuple(p.node for p in plan_cluster(cluster))
