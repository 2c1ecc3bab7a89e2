"""Gang placement: whole gangs in one cluster, best-fit packing, whole nodes in the tightest topology block."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Blocker
from tests.core.builders import World, two_team_world

decide = AllotmentPolicy().decide


def test_small_job_packs_onto_the_fullest_node_that_fits() -> None:
    w = two_team_world().running("busy", "blue", {"c1-h100-02": 6}, slice_end=9000)
    w.pending("small", "red", gpus=2)
    d = decide(w.snapshot(), 100)
    (start,) = d.starts
    assert start.placement[0].node == "c1-h100-02"
    assert start.placement[0].gpus == (6, 7)


def test_multi_node_gang_gets_whole_nodes_in_one_rack() -> None:
    # racks of 2 nodes: r0 = {00, 01}, r1 = {02, 03}, r2 = {04, 05}; node 00 and 03 are partly busy
    w = World().cluster("c1", nodes=6, rack_size=2, block_size=3).budget("org").budget("a", "org")
    w.running("x", "a", {"c1-h100-00": 1}, slice_end=9000).running("y", "a", {"c1-h100-03": 1}, slice_end=9000)
    w.pending("gang", "a", gpus=8, replicas=2)
    d = decide(w.snapshot(), 100)
    (start,) = d.starts
    assert sorted(a.node for a in start.placement) == ["c1-h100-04", "c1-h100-05"]
    assert all(a.gpus == tuple(range(8)) for a in start.placement)


def test_gang_never_spans_clusters() -> None:
    w = World().cluster("c1", nodes=1).cluster("c2", nodes=1).budget("org").budget("a", "org")
    w.pending("gang", "a", gpus=8, replicas=2)
    d = decide(w.snapshot(), 100)
    assert d.starts == ()
    assert d.pending["gang"].blocker is Blocker.NO_POOL  # no single cluster has two nodes


@dataclass(frozen=True)
class PoolCase:
    name: str
    gpu_types: tuple[str, ...]
    clusters: tuple[str, ...]
    expect_cluster: str | None


POOL_CASES = [
    PoolCase("any type prefers the cheaper H100", (), (), "h"),
    PoolCase("listed order is the user's preference", ("B200", "H100"), (), "b"),
    PoolCase("cluster restriction holds", (), ("b",), "b"),
    PoolCase("an absent type never runs", ("B300",), (), None),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: c.name)
def test_pool_choice(case: PoolCase) -> None:
    w = World().cluster("h", nodes=1).cluster("b", nodes=1, gpu_type="B200").budget("org").budget("a", "org")
    w.pending("j", "a", gpus=4, gpu_types=case.gpu_types, clusters=case.clusters)
    d = decide(w.snapshot(), 0)
    if case.expect_cluster is None:
        assert d.starts == ()
        assert d.pending["j"].blocker is Blocker.NO_POOL
    else:
        assert d.starts[0].placement[0].node.startswith(case.expect_cluster + "-")


def test_a_replica_larger_than_any_node_can_never_run() -> None:
    w = two_team_world().pending("huge", "red", gpus=16)
    d = decide(w.snapshot(), 0)
    assert d.pending["huge"].blocker is Blocker.NO_POOL
    assert d.pending["huge"].estimated_start is None


def test_replicas_that_fit_one_node_share_it() -> None:
    w = two_team_world().pending("four-by-two", "red", gpus=2, replicas=4)
    d = decide(w.snapshot(), 0)
    (start,) = d.starts
    assert len(start.placement) == 1 and len(start.placement[0].gpus) == 8
