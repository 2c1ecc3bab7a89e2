"""service.shapes.short_of: which of CPUs or memory per replica makes a job impossible on every allowed pool that
could hold its GPUs, by placement's rule (a gang on one node needs replicas × the request there; a multi-node gang
takes whole nodes of its pool's largest size, each counted as holding as many replicas as fit its GPUs). A node
that declares 0 counts as unlimited."""

from __future__ import annotations

from pathlib import Path

import pytest

from allotment.service.shapes import NodeKind, read_kinds, short_of
from allotment.store.db import make_engine, session_factory
from allotment.store.migrate import upgrade
from allotment.store.tables import ClusterRow, NodeRow

BIG = NodeKind("a", "H100", 8, 224, 2048 * 1024, 4)
THIN = NodeKind("a", "H100", 8, 32, 256 * 1024, 2)
BARE = NodeKind("b", "B200", 8, 0, 0, 2)


@pytest.mark.parametrize(
    ("kinds", "gpus", "replicas", "cpus", "memory", "field"),
    [
        pytest.param([BIG], 1, 1, 0, 0, None, id="no-request"),
        pytest.param([BIG], 1, 1, 224, 2048 * 1024, None, id="a-whole-node-of-cpus-and-memory"),
        pytest.param([BIG], 1, 1, 225, 0, "resources.cpus", id="one-cpu-too-many"),
        pytest.param([BIG], 1, 1, 0, 2048 * 1024 + 1, "resources.memory", id="one-mib-too-many"),
        pytest.param([BIG], 1, 8, 28, 0, None, id="eight-replicas-on-one-node"),
        pytest.param([BIG], 1, 8, 29, 0, "resources.cpus", id="eight-replicas-overflow-one-node"),
        pytest.param([BIG], 4, 8, 112, 0, None, id="whole-nodes-two-replicas-each"),
        pytest.param([BIG], 4, 8, 113, 0, "resources.cpus", id="whole-nodes-overflow"),
        pytest.param([BIG, THIN], 8, 5, 100, 0, "resources.cpus", id="only-four-nodes-have-the-cpus"),
        pytest.param([BIG, THIN], 8, 6, 30, 0, None, id="all-six-nodes-have-the-cpus"),
        pytest.param([BIG], 16, 1, 300, 0, None, id="gpus-that-never-fit-are-for-unfittable-to-name"),
        pytest.param([BIG, BARE], 1, 1, 4096, 0, None, id="an-undeclared-node-holds-anything"),
    ],
)
def test_the_field_that_makes_cpus_or_memory_impossible(
    kinds: list[NodeKind], gpus: int, replicas: int, cpus: int, memory: int, field: str | None
) -> None:
    found = short_of(kinds, gpus, replicas, cpus, memory, (), ())
    assert (None if found is None else ".".join(str(p) for p in found[0])) == field


def test_only_allowed_pools_count() -> None:
    assert short_of([BIG, BARE], 1, 1, 4096, 0, (), ("a",)) is not None
    assert short_of([BIG, BARE], 1, 1, 4096, 0, ("B200",), ()) is None


def test_kinds_are_read_from_the_node_table(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    sessions = session_factory(engine)
    with sessions.begin() as s:
        s.add(ClusterRow(name="a", topology=[]))
        s.flush()
        for i, (cpus, memory) in enumerate([(224, 2048), (224, 2048), (32, 0)]):
            s.add(
                NodeRow(
                    name=f"n{i}", cluster="a", gpu_type="H100", gpus=8, labels={}, state="ready", forced=False,
                    reason=None, updated_at=0, cpus=cpus, memory_mib=memory,
                )
            )  # fmt: skip
    with sessions() as s:
        assert read_kinds(s) == [NodeKind("a", "H100", 8, 32, 0, 1), NodeKind("a", "H100", 8, 224, 2048, 2)]
    engine.dispose()
