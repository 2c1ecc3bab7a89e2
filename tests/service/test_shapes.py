"""service.shapes: which field makes a gang impossible on a fleet, by the placement rule (a gang that fits one node
takes one node; a larger one takes whole nodes of its pool's largest size), and the pools read from the node table
(a pool's size is its largest nodes; smaller nodes of the pool hold only single-node jobs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from allotment.service.shapes import PoolShape, read_shapes, unfittable
from allotment.store.db import make_engine, session_factory
from allotment.store.migrate import upgrade
from allotment.store.tables import ClusterRow, NodeRow

A8 = PoolShape("a", "H100", 8, 4)
B4 = PoolShape("b", "B200", 4, 16)


@pytest.mark.parametrize(
    ("gpus", "replicas", "types", "clusters", "field"),
    [
        pytest.param(8, 4, (), (), None, id="all-of-a"),
        pytest.param(4, 16, (), (), None, id="all-of-b"),
        pytest.param(4, 8, ("H100",), (), None, id="4-gpu-replicas-two-per-node-of-a"),
        pytest.param(9, 1, (), (), "resources.gpus", id="larger-than-any-node"),
        pytest.param(8, 1, ("B200",), (), "resources.gpus", id="larger-than-the-allowed-type"),
        pytest.param(8, 5, (), (), "resources.replicas", id="more-whole-nodes-than-a-has"),
        pytest.param(4, 17, (), (), "resources.replicas", id="a-gang-never-spans-two-pools"),
        pytest.param(1, 1, ("H100",), ("b",), "resources.gpu_types", id="type-not-in-the-cluster"),
        pytest.param(1, 1, (), ("c",), "resources.clusters", id="cluster-without-nodes"),
    ],
)
def test_the_field_that_makes_a_gang_impossible(
    gpus: int, replicas: int, types: tuple[str, ...], clusters: tuple[str, ...], field: str | None
) -> None:
    found = unfittable([A8, B4], gpus, replicas, types, clusters)
    assert (None if found is None else ".".join(str(p) for p in found[0])) == field


def test_an_empty_fleet_refuses_nothing() -> None:
    assert unfittable([], 64, 64, (), ()) is None


def test_a_pool_is_its_largest_nodes(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    sessions = session_factory(engine)
    with sessions.begin() as s:
        s.add(ClusterRow(name="a", topology=[]))
        s.flush()
        sizes = [8, 8, 4, 4, 4]
        for i, gpus in enumerate(sizes):
            s.add(NodeRow(name=f"n{i}", cluster="a", gpu_type="H100", gpus=gpus, labels={}, state="down",
                          forced=False, updated_at=0))  # fmt: skip
    with sessions() as s:
        assert read_shapes(s) == [PoolShape("a", "H100", 8, 2)]
    engine.dispose()
