"""The fleet ports: what fleet sync needs from a cluster manager (FleetSource) and from the node table
(FleetSyncStore), the records crossing them, and the one rule of the vocabulary (`action_for`).

Owns: `DiscoveredNode` (a node as the manager reports it), `NodeAction` (what can be written to a manager: drain,
resume, down), `action_for` (the action that carries an Allotment node state), `NodeRecord` and `FleetEdit` (the
node table and the sync's memory, as plain data, inside one transaction), and the two Protocols.
Must not: implement a manager or a store (executors/slurm and store/fleet_sync_store.py do), or decide who wins
when both sides changed (engine/fleet_sync.py does).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from allotment.core.model import Node, NodeState

NodeAction = Literal["drain", "resume", "down"]
"""What fleet sync writes to a cluster manager. A manager has no separate cordon: a cordon is a drain there
("nothing new lands, running work stays")."""


def action_for(state: NodeState) -> NodeAction:
    """The manager action that carries an Allotment node state."""
    if state is NodeState.READY:
        return "resume"
    if state is NodeState.DOWN:
        return "down"
    return "drain"


@dataclass(frozen=True, slots=True)
class DiscoveredNode:
    node: Node
    """The node as a core Node: its cluster, GPU type and count, and its state mapped to NodeState."""
    manager_state: str
    """The manager's own state words, e.g. Slurm's "IDLE+DRAIN"."""
    reason: str | None
    """Why the node is drained or down, as the manager recorded it (None when it has no reason)."""


class FleetSource(Protocol):
    """A cluster manager whose nodes Allotment mirrors (SlurmExecutor is one)."""

    @property
    def manager_name(self) -> str:
        """The manager's name as node reasons show it, e.g. "slurm"."""
        ...

    def discover_nodes(self) -> list[DiscoveredNode]:
        """Every node the manager has, sorted by name."""
        ...

    def set_node_state(self, node: str, state: NodeAction, reason: str = "allotment") -> None:
        """Write one action to the manager; raises when the manager refuses or cannot be reached."""
        ...


@dataclass(slots=True)
class NodeRecord:
    """One row of the node table as the sync reads and changes it (labels are left alone)."""

    name: str
    cluster: str
    gpu_type: str
    gpus: int
    state: NodeState
    forced: bool
    reason: str | None
    updated_at: int
    cpus: int = 0
    """CPUs the node offers to jobs (0: not declared; decision 60)."""
    memory: int = 0
    """MiB of memory the node offers to jobs (0: not declared)."""


@dataclass(slots=True)
class FleetEdit:
    """The node table and the sync's memory inside one transaction. What the sync changes on `nodes` (and adds
    with `add`) and leaves in `memory` is written when the transaction ends without an exception."""

    nodes: dict[str, NodeRecord]
    """Every node of the table, of every cluster, by name."""
    memory: dict[str, dict[str, Any]]
    """The sync's own memory (JSON-shaped), read from and written back to its key."""
    added: list[str] = field(default_factory=list)

    def add(self, record: NodeRecord) -> None:
        """A node the table lacks: inserted (with no labels) when the transaction ends."""
        if record.name in self.nodes:
            raise ValueError(f"node {record.name!r} is already in the table")
        self.nodes[record.name] = record
        self.added.append(record.name)


class FleetSyncStore(Protocol):
    def edit(self, key: str) -> AbstractContextManager[FleetEdit]:
        """One transaction over the node table and the memory kept under `key`: yields them as a FleetEdit and
        writes what changed when the block exits normally; an exception rolls everything back."""
        ...
