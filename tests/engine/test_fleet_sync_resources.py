"""Fleet sync carries the CPUs and memory a cluster manager reports for its nodes into the node table (decision 60):
a discovered node gets them, a known node is updated when the manager's figures change (the manager's hardware
wins, like its GPU count), and unchanged figures leave the row unwritten. A manager cluster kept in memory and the
real SQL fleet store (SQLite and PostgreSQL); Slurm's own figures: tests/executors/slurm/test_slurm_fleet.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from allotment.core.model import Cluster, Node, NodeState
from allotment.engine.fleet_sync import FleetSync
from allotment.executors.slurm.fleet import memory_of
from allotment.ports.fleet import DiscoveredNode, NodeAction
from allotment.store.db import session_factory
from allotment.store.fleet import seed_from
from allotment.store.fleet_sync_store import SqlFleetSyncStore
from allotment.store.tables import NodeRow

T0 = 1_793_491_200


class Manager:
    """A FleetSource whose nodes (GPUs, CPUs, MiB) live in a dict."""

    manager_name = "mgr"

    def __init__(self, nodes: dict[str, tuple[int, int, int]]) -> None:
        self.nodes = dict(nodes)

    def discover_nodes(self) -> list[DiscoveredNode]:
        return [
            DiscoveredNode(Node(name, "a", "h100", g, cpus=c, memory=m), "IDLE", None)
            for name, (g, c, m) in sorted(self.nodes.items())
        ]

    def set_node_state(self, node: str, state: NodeAction, reason: str = "allotment") -> None:
        raise AssertionError("nothing to write: every node is ready on both sides")


@pytest.fixture
def sessions(db: Engine) -> Iterator[sessionmaker[Session]]:
    factory = session_factory(db)
    with factory.begin() as s:
        seed_from(s, now=T0, clusters=[Cluster("a")], nodes=[Node("n1", "a", "h100", 8, cpus=64, memory=1024)])
    yield factory


def _row(sessions: sessionmaker[Session], name: str) -> tuple[int, int, int]:
    with sessions() as s:
        row = s.get(NodeRow, name)
        assert row is not None and row.state == NodeState.READY.value
        return row.cpus, row.memory_mib, row.updated_at


def test_discovered_and_changed_cpus_and_memory_reach_the_node_table(sessions: sessionmaker[Session]) -> None:
    manager = Manager({"n1": (8, 224, 2048 * 1024), "n2": (8, 112, 0)})
    FleetSync(SqlFleetSyncStore(sessions), manager, "a", "h100").sync(T0 + 10)
    assert _row(sessions, "n1") == (224, 2048 * 1024, T0 + 10)  # the manager's hardware wins
    assert _row(sessions, "n2") == (112, 0, T0 + 10)
    FleetSync(SqlFleetSyncStore(sessions), manager, "a", "h100").sync(T0 + 20)
    assert _row(sessions, "n1")[2] == T0 + 10  # unchanged figures: the row is not written


@pytest.mark.parametrize(
    ("raw", "mib"),
    [
        pytest.param({"real_memory": 515000}, 515000, id="22.05-plain-number"),
        pytest.param({"real_memory": {"set": True, "infinite": False, "number": 2048}}, 2048, id="newer-wrapped"),
        pytest.param({"real_memory": 1}, 0, id="slurm's-default-of-1-is-not-declared"),
        pytest.param({}, 0, id="absent"),
        pytest.param({"real_memory": {"set": False, "number": 0}}, 0, id="unset"),
    ],
)
def test_slurm_memory_reads_as_mib_or_not_declared(raw: dict[str, object], mib: int) -> None:
    assert memory_of(raw) == mib
