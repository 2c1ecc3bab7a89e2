"""The largest job the fleet could ever hold, and why a job that no allowed node or cluster could hold is refused.

Owns: `read_shapes` (per pool — a cluster and a GPU type — the GPUs of its largest nodes and how many nodes have
that many, from the node table: every node whatever its state, since a drained or down node comes back, and nodes a
fleet sync discovered count like configured ones) and `unfittable`, which applies the placement rule
(core.placement.nodes_for: a gang that fits on one node takes one node; a larger one takes whole nodes of its
pool's largest size, in one cluster) to say which field makes a job impossible and what the largest possible job
is; and `read_kinds` with `short_of`, the same for the CPUs and memory per replica a job asks beside its GPUs (a
node that declares none counts as unlimited; a node holding r replicas needs r times the request: decision 60).
A job refused here would otherwise wait forever.

Must not: look at what is free now or at budgets and windows (the scheduler does): a job that could run some day
is accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from allotment.config.errors import Loc
from allotment.config.fields import memory_text
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


@dataclass(frozen=True, slots=True)
class NodeKind:
    """Nodes of one pool alike in GPUs, CPUs and memory (0: not declared), and how many there are."""

    cluster: str
    gpu_type: str
    gpus: int
    cpus: int
    memory: int
    count: int

    def holds(self, replicas: int, cpus: int, memory: int) -> bool:
        """Could this node's CPUs and memory hold `replicas` replicas of `cpus` CPUs and `memory` MiB each?"""
        return (self.cpus == 0 or replicas * cpus <= self.cpus) and (
            self.memory == 0 or replicas * memory <= self.memory
        )


def read_kinds(session: Session) -> list[NodeKind]:
    """Every pool's nodes grouped by GPUs, CPUs and memory (every state, like read_shapes)."""
    rows = session.execute(
        select(NodeRow.cluster, NodeRow.gpu_type, NodeRow.gpus, NodeRow.cpus, NodeRow.memory_mib, func.count())
        .group_by(NodeRow.cluster, NodeRow.gpu_type, NodeRow.gpus, NodeRow.cpus, NodeRow.memory_mib)
        .order_by(NodeRow.cluster, NodeRow.gpu_type, NodeRow.gpus, NodeRow.cpus, NodeRow.memory_mib)
    )
    return [NodeKind(c, t, int(g), int(cp), int(m), int(n)) for c, t, g, cp, m, n in rows]


def _fits(kinds: Sequence[NodeKind], gpus: int, replicas: int, cpus: int, memory: int) -> bool:
    """Could one pool hold the gang with these CPUs and memory per replica (placement's rule: a gang that fits one
    node takes one node; a larger one takes whole nodes of the pool's largest size, each counted as holding as many
    replicas as fit its GPUs)?"""
    pools: dict[tuple[str, str], list[NodeKind]] = {}
    for k in kinds:
        pools.setdefault((k.cluster, k.gpu_type), []).append(k)
    for pool in pools.values():
        size = max(k.gpus for k in pool)
        need = nodes_for(gpus, replicas, size)
        if need == 1:
            if any(k.gpus >= gpus * replicas and k.holds(replicas, cpus, memory) for k in pool):
                return True
        elif need > 1:
            per_node = size // gpus
            if sum(k.count for k in pool if k.gpus == size and k.holds(per_node, cpus, memory)) >= need:
                return True
    return False


def short_of(
    kinds: Sequence[NodeKind],
    gpus: int,
    replicas: int,
    cpus: int,
    memory: int,
    gpu_types: Sequence[str],
    clusters: Sequence[str],
) -> tuple[Loc, str] | None:
    """The field and reason that make the CPUs or memory per replica impossible on every allowed pool that could
    hold the job's GPUs, or None (also when the job asks for neither, or no allowed pool holds its GPUs at all:
    `unfittable` says why then)."""
    if cpus <= 0 and memory <= 0:
        return None
    allowed = [
        k for k in kinds if (not gpu_types or k.gpu_type in gpu_types) and (not clusters or k.cluster in clusters)
    ]
    if not allowed or not _fits(allowed, gpus, replicas, 0, 0) or _fits(allowed, gpus, replicas, cpus, memory):
        return None
    if cpus > 0 and not _fits(allowed, gpus, replicas, cpus, 0):
        most = max((k.cpus for k in allowed if k.cpus > 0), default=0)
        return ("resources", "cpus"), (
            f"{replicas} × {cpus} CPUs cannot be placed beside the job's GPUs: no allowed node, or set of whole nodes, "
            f"offers that many CPUs per replica (the most on one allowed node is {most})"
        )
    most_memory = max((k.memory for k in allowed if k.memory > 0), default=0)
    return ("resources", "memory"), (
        f"{replicas} × {memory_text(memory)} of memory cannot be placed beside the job's GPUs"
        + (" and CPUs" if cpus > 0 else "")
        + f": no allowed node, or set of whole nodes, offers that much per replica (the most on one allowed node is "
        f"{memory_text(most_memory)})"
    )
