"""The largest job the fleet could ever hold, and why a job that no allowed node or cluster could hold is refused.

Owns: `read_shapes` (per pool — a cluster and a GPU type — the GPUs of its largest nodes and how many nodes have
that many, from the node table: every node whatever its state, since a drained or down node comes back, and nodes a
fleet sync discovered count like configured ones) and `unfittable`, which applies the placement rule
(core.placement.nodes_for: a gang that fits on one node takes one node; a larger one takes whole nodes of its
pool's largest size, in one cluster) to say which field makes a job impossible and what the largest possible job
is. A job refused here would otherwise wait forever.

Must not: look at what is free now or at budgets and windows (the scheduler does): a job that could run some day
is accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from allotment.config.errors import Loc
from allotment.core.placement import nodes_for
from allotment.store.tables import NodeRow


@dataclass(frozen=True, slots=True)
class PoolShape:
    cluster: str
    gpu_type: str
    size: int
    """GPUs on the pool's largest nodes."""
    nodes: int
    """Nodes of that size."""

    def most_replicas(self, gpus: int) -> int:
        """The most replicas of `gpus` GPUs one gang can have in this pool."""
        return self.nodes * (self.size // gpus) if gpus <= self.size else 0

    def largest_job(self) -> str:
        replicas = "1 replica" if self.nodes == 1 else f"{self.nodes} replicas"
        return f"{replicas} × {self.size} GPUs ({self.nodes * self.size} × {self.gpu_type} on cluster {self.cluster})"


def read_shapes(session: Session) -> list[PoolShape]:
    """Every pool's largest node size and how many nodes have it."""
    rows = session.execute(
        select(NodeRow.cluster, NodeRow.gpu_type, NodeRow.gpus, func.count()).group_by(
            NodeRow.cluster, NodeRow.gpu_type, NodeRow.gpus
        )
    )
    best: dict[tuple[str, str], tuple[int, int]] = {}
    for cluster, gpu_type, gpus, count in rows:
        size, nodes = best.get((cluster, gpu_type), (0, 0))
        if gpus > size:
            best[(cluster, gpu_type)] = (int(gpus), int(count))
        elif gpus == size:
            best[(cluster, gpu_type)] = (size, nodes + int(count))
    return [PoolShape(c, t, size, nodes) for (c, t), (size, nodes) in sorted(best.items()) if size > 0]


def _names(values: Sequence[str]) -> str:
    return ", ".join(values)


def unfittable(
    shapes: Sequence[PoolShape], gpus: int, replicas: int, gpu_types: Sequence[str], clusters: Sequence[str]
) -> tuple[Loc, str] | None:
    """The field and reason that make a gang of `replicas` × `gpus` on the allowed GPU types and clusters (any when
    empty) impossible on this fleet, or None when some pool could hold it. An empty fleet refuses nothing (nodes may
    still be discovered)."""
    if not shapes:
        return None
    allowed = [
        p for p in shapes if (not gpu_types or p.gpu_type in gpu_types) and (not clusters or p.cluster in clusters)
    ]
    if not allowed:
        pools = _names([f"{p.size} × {p.gpu_type} on {p.cluster}" for p in shapes])
        loc: Loc = ("resources", "gpu_types") if gpu_types else ("resources", "clusters")
        wanted = f"GPUs of type {_names(gpu_types)}" if gpu_types else "GPUs"
        where = f" on cluster {_names(clusters)}" if clusters else ""
        return loc, f"no node has {wanted}{where}; the fleet's nodes are: {pools}"
    filtered = bool(gpu_types or clusters)
    scope = "the allowed GPU types and clusters" if filtered else "this fleet"
    largest = max(allowed, key=lambda p: (p.size * p.nodes, p.size))
    biggest_node = max(allowed, key=lambda p: p.size)
    if gpus > biggest_node.size:
        node = f"{biggest_node.size} × {biggest_node.gpu_type} on cluster {biggest_node.cluster}"
        which = "the largest allowed node" if filtered else "the largest node"
        return ("resources", "gpus"), (
            f"{gpus} GPUs per replica exceeds {which} ({node}); "
            f"the largest job {scope} can hold is {largest.largest_job()}"
        )
    if any(0 < nodes_for(gpus, replicas, p.size) <= p.nodes for p in allowed):
        return None
    roomiest = max(allowed, key=lambda p: (p.most_replicas(gpus), p.size))
    need = nodes_for(gpus, replicas, roomiest.size)
    return ("resources", "replicas"), (
        f"{replicas} replicas × {gpus} GPUs need {need} whole nodes of {roomiest.size} × {roomiest.gpu_type}, and "
        f"cluster {roomiest.cluster} has {roomiest.nodes}; with {gpus} GPUs per replica at most "
        f"{roomiest.most_replicas(gpus)} replicas fit; the largest job {scope} can hold is {largest.largest_job()}"
    )
