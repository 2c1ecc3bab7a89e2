"""Fleet sync through its ports, without Slurm: a cluster manager kept in memory (our own FleetSource) and the real
SQL fleet store (SQLite and PostgreSQL). The same rules run against a real Slurm in tests/integration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from allotment.core.model import Cluster, Node, NodeState
from allotment.engine.fleet_sync import MISSING_REASON, FleetSync, SyncedExecutor
from allotment.executors.simulated import Outcome, SimulatedExecutor
from allotment.ports.executor import LaunchSpec
from allotment.ports.fleet import DiscoveredNode, NodeAction, action_for
from allotment.store.db import session_factory
from allotment.store.fleet import seed_from
from allotment.store.fleet_sync_store import SqlFleetSyncStore
from allotment.store.records import get_state
from allotment.store.tables import NodeRow
from tests.engine.rig import ManualClock

T0 = 1_793_491_200
AFTER = {"drain": NodeState.DRAINING, "down": NodeState.DOWN, "resume": NodeState.READY}


class MemoryManager:
    """A cluster manager whose nodes live in a dict: what it is told is what it reports (a FleetSource)."""

    manager_name = "mgr"

    def __init__(self, nodes: dict[str, tuple[int, NodeState, str | None]]) -> None:
        self.nodes = dict(nodes)
        self.written: list[tuple[str, NodeAction, str]] = []
        self.refuse: set[str] = set()

    def discover_nodes(self) -> list[DiscoveredNode]:
        return [
            DiscoveredNode(Node(name, "a", "h100", gpus, state=state), state.value.upper(), reason)
            for name, (gpus, state, reason) in sorted(self.nodes.items())
        ]

    def set_node_state(self, node: str, state: NodeAction, reason: str = "allotment") -> None:
        if node in self.refuse:
            raise RuntimeError(f"{node}: refused")
        self.written.append((node, state, reason))
        gpus, _, _ = self.nodes[node]
        self.nodes[node] = (gpus, AFTER[state], None if state == "resume" else reason)


@pytest.fixture
def sessions(db: Engine) -> Iterator[sessionmaker[Session]]:
    factory = session_factory(db)
    with factory.begin() as s:
        seed_from(
            s,
            now=T0,
            clusters=[Cluster("a"), Cluster("b")],
            nodes=[Node("n1", "a", "h100", 8), Node("n2", "a", "h100", 8), Node("b1", "b", "h100", 4)],
        )
    yield factory


def _row(sessions: sessionmaker[Session], name: str) -> NodeRow:
    with sessions() as s:
        row = s.get(NodeRow, name)
        assert row is not None
        return row


def _set(sessions: sessionmaker[Session], name: str, state: NodeState, reason: str | None) -> None:
    with sessions.begin() as s:
        row = s.get(NodeRow, name)
        assert row is not None
        row.state, row.reason = state.value, reason


def test_discovery_adds_new_nodes_keeps_missing_ones_down_and_leaves_other_clusters(
    sessions: sessionmaker[Session],
) -> None:
    manager = MemoryManager(
        {
            "n1": (4, NodeState.READY, None),
            "n3": (2, NodeState.DRAINING, "bad fan"),
            "b1": (4, NodeState.DOWN, "elsewhere"),
        }
    )
    report = FleetSync(SqlFleetSyncStore(sessions), manager, "a", "h100").sync(T0 + 10)
    assert report.added == ["n3"] and report.missing == ["n2"] and not report.pushed
    n1, n2, n3, b1 = (_row(sessions, n) for n in ("n1", "n2", "n3", "b1"))
    assert (n1.gpus, n1.state, n1.updated_at) == (4, "ready", T0 + 10)  # the manager's GPU count wins
    assert (n2.state, n2.reason, n2.forced) == ("down", MISSING_REASON, False)
    assert (n3.cluster, n3.gpu_type, n3.gpus, n3.state, n3.labels) == ("a", "h100", 2, "draining", {})
    assert n3.reason == "mgr DRAINING: bad fan"
    assert (b1.state, b1.updated_at) == ("ready", T0)  # a node of another cluster here is not synced
    with sessions() as s:
        memory = get_state(s, "fleet_sync:a")
    assert memory["n3"] == {"allot": "draining", "slurm": "draining", "pushed_at": None}

    again = FleetSync(SqlFleetSyncStore(sessions), manager, "a", "h100").sync(T0 + 20)  # memory is durable
    assert not (again.added or again.pulled or again.pushed or again.missing or again.failed)
    assert _row(sessions, "n1").updated_at == T0 + 10  # an unchanged row is not written


def test_states_sync_both_ways_and_a_write_settles(sessions: sessionmaker[Session]) -> None:
    manager = MemoryManager({"n1": (8, NodeState.READY, None), "n2": (8, NodeState.READY, None)})
    sync = FleetSync(SqlFleetSyncStore(sessions), manager, "a", "h100", settle=15)
    sync.sync(T0)

    manager.nodes["n1"] = (8, NodeState.DOWN, "not responding")  # the manager's change is pulled
    assert sync.sync(T0 + 1).pulled == {"n1": "down"}
    assert (_row(sessions, "n1").state, _row(sessions, "n1").reason) == ("down", "mgr DOWN: not responding")

    _set(sessions, "n2", NodeState.CORDONED, "disk errors")  # an operator's change is pushed
    assert sync.sync(T0 + 2).pushed == {"n2": "drain"}
    assert manager.written == [("n2", action_for(NodeState.CORDONED), "allotment: disk errors")]
    assert _row(sessions, "n2").state == "cordoned"  # the manager reports DRAINING: what was expected

    manager.nodes["n2"] = (8, NodeState.DOWN, "flap")  # within `settle` of the write: ignored
    assert not sync.sync(T0 + 10).pulled and _row(sessions, "n2").state == "cordoned"
    assert sync.sync(T0 + 17).pulled == {"n2": "down"}  # after it: pulled

    _set(sessions, "n2", NodeState.READY, None)
    manager.refuse.add("n2")  # a refused write is reported and tried again at the next sync
    assert "n2" in sync.sync(T0 + 20).failed
    manager.refuse.clear()
    assert sync.sync(T0 + 21).pushed == {"n2": "resume"}
    assert manager.nodes["n2"][1] is NodeState.READY


def test_a_failed_edit_leaves_the_table_and_memory_unchanged(sessions: sessionmaker[Session]) -> None:
    store = SqlFleetSyncStore(sessions)
    with pytest.raises(RuntimeError), store.edit("fleet_sync:a") as edit:
        edit.nodes["n1"].state = NodeState.DOWN
        edit.memory["n1"] = {"allot": "down"}
        raise RuntimeError("the manager went away mid-sync")
    assert _row(sessions, "n1").state == "ready"
    with sessions() as s:
        assert get_state(s, "fleet_sync:a") is None
        assert [r.name for r in s.scalars(select(NodeRow).order_by(NodeRow.name))] == ["b1", "n1", "n2"]


def test_synced_executor_syncs_at_first_poll_then_every_interval(sessions: sessionmaker[Session]) -> None:
    manager = MemoryManager({"n1": (8, NodeState.READY, None), "n2": (8, NodeState.READY, None)})
    clock = ManualClock(T0)

    def outcome(spec: LaunchSpec) -> Outcome:
        return Outcome(duration=60)

    inner = SimulatedExecutor(outcome, now=T0, clock=clock.now)
    executor = SyncedExecutor(inner, FleetSync(SqlFleetSyncStore(sessions), manager, "a", "h100"), clock, every=10)
    executor.poll()
    assert executor.last_report is not None and executor.last_report.added == []
    manager.nodes["n1"] = (8, NodeState.DOWN, None)
    clock.t = T0 + 5
    executor.poll()
    assert _row(sessions, "n1").state == "ready"  # not due yet
    clock.t = T0 + 10
    executor.poll()
    assert _row(sessions, "n1").state == "down"
