"""Conversion of a validated configuration into the core's plain, immutable data.

Owns: rates in credit-microunits per GPU-hour, clusters, expanded nodes, budgets with micro allocations, the
PolicyConfig (durations in seconds, prices per mille) and capacity windows, bundled as `CoreConfig`.

Must not: validate (the configuration is already checked) or hold users, members or the period: those stay in
the configuration layer, where the API reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from allotment.config.fields import to_micro, to_per_mille
from allotment.config.fleet import expand_cluster
from allotment.config.schema import AllotmentConfig
from allotment.core.model import Budget, CapacityWindow, Cluster, Micro, Node, PolicyConfig


def core_rates(cfg: AllotmentConfig) -> dict[str, Micro]:
    """GPU type → credit-microunits per GPU-hour (exact: 1.6 credits → 1_600_000)."""
    return {gpu_type: to_micro(rate) for gpu_type, rate in cfg.credits.items()}


def core_clusters(cfg: AllotmentConfig) -> tuple[Cluster, ...]:
    return tuple(Cluster(name=c.name, topology=tuple(c.topology)) for c in cfg.fleet.clusters)


def core_nodes(cfg: AllotmentConfig) -> tuple[Node, ...]:
    return tuple(node for cluster in cfg.fleet.clusters for node in expand_cluster(cluster))


def core_budgets(cfg: AllotmentConfig) -> tuple[Budget, ...]:
    return tuple(
        Budget(name=b.name, parent=b.parent, allocation=to_micro(b.allocation), max_gpus=b.max_gpus)
        for b in cfg.budgets
    )


def core_policy(cfg: AllotmentConfig) -> PolicyConfig:
    p = cfg.policy
    return PolicyConfig(
        min_slice=p.min_slice,
        max_slice=p.max_slice,
        max_grace=p.max_grace,
        default_slice=p.default_slice,
        default_grace=p.default_grace,
        session_max_gpus=p.session_max_gpus,
        session_max_length=p.session_max_length,
        session_idle_timeout=p.session_idle_timeout,
        session_max_per_user=p.session_max_per_user,
        default_headroom=p.default_headroom,
        headroom=dict(p.headroom),
        headroom_max_grace=p.headroom_max_grace,
        opportunistic_price=to_per_mille(p.opportunistic_price),
        session_price=to_per_mille(p.session_price),
        usage_half_life=p.usage_half_life,
        starvation_after=p.starvation_after,
        checkpoint_wait=p.checkpoint_wait,
        max_reservations=p.max_reservations,
        room_window=p.room_window,
        room_quantile=to_per_mille(p.room_quantile),
        default_room_ceiling=p.default_room_ceiling,
        room_ceiling=dict(p.room_ceiling),
        room_whole_node=p.room_whole_node,
    )


def core_windows(cfg: AllotmentConfig) -> tuple[CapacityWindow, ...]:
    return tuple(
        CapacityWindow(
            id=w.id,
            budget=w.budget,
            cluster=w.cluster,
            gpu_type=w.gpu_type,
            gpus=w.gpus,
            start=w.start,
            end=w.end,
        )
        for w in cfg.windows
    )


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """The parts of a configuration the scheduling core consumes, as core types."""

    clusters: tuple[Cluster, ...]
    nodes: tuple[Node, ...]
    rates: Mapping[str, Micro]
    budgets: tuple[Budget, ...]
    policy: PolicyConfig
    windows: tuple[CapacityWindow, ...]

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)


def to_core(cfg: AllotmentConfig) -> CoreConfig:
    return CoreConfig(
        clusters=core_clusters(cfg),
        nodes=core_nodes(cfg),
        rates=core_rates(cfg),
        budgets=core_budgets(cfg),
        policy=core_policy(cfg),
        windows=core_windows(cfg),
    )
