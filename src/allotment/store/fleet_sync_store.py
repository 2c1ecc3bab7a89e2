"""The FleetSyncStore port on SQL: the node table and fleet sync's memory as one FleetEdit per transaction.

Owns: `SqlFleetSyncStore.edit(key)`, which opens a transaction, reads every node row and the JSON kept under `key`
in the engine key/value table as plain records (ports/fleet.py), and on a normal exit writes back exactly the
fields the sync changed, inserts the nodes it added (with no labels) and stores the memory.
Must not: decide anything about node states (engine/fleet_sync.py does) or touch any table but nodes and
engine_state.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from allotment.core.model import NodeState
from allotment.ports.fleet import FleetEdit, NodeRecord
from allotment.store.records import get_state, set_state
from allotment.store.tables import NodeRow


def _record(row: NodeRow) -> NodeRecord:
    return NodeRecord(
        name=row.name,
        cluster=row.cluster,
        gpu_type=row.gpu_type,
        gpus=row.gpus,
        state=NodeState(row.state),
        forced=row.forced,
        reason=row.reason,
        updated_at=row.updated_at,
        cpus=row.cpus,
        memory=row.memory_mib,
    )


def _write(row: NodeRow, rec: NodeRecord) -> None:
    """Copy the fields that differ (an unchanged row is not updated)."""
    if row.cluster != rec.cluster:
        row.cluster = rec.cluster
    if row.gpu_type != rec.gpu_type:
        row.gpu_type = rec.gpu_type
    if row.gpus != rec.gpus:
        row.gpus = rec.gpus
    if row.cpus != rec.cpus:
        row.cpus = rec.cpus
    if row.memory_mib != rec.memory:
        row.memory_mib = rec.memory
    if row.state != rec.state.value:
        row.state = rec.state.value
    if row.forced != rec.forced:
        row.forced = rec.forced
    if row.reason != rec.reason:
        row.reason = rec.reason
    if row.updated_at != rec.updated_at:
        row.updated_at = rec.updated_at


class SqlFleetSyncStore:
    """A FleetSyncStore (allotment.ports.fleet) on the SQL store's sessions."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    @contextmanager
    def edit(self, key: str) -> Iterator[FleetEdit]:
        with self.sessions.begin() as session:
            rows = {r.name: r for r in session.scalars(select(NodeRow))}
            memory = dict(get_state(session, key) or {})
            edit = FleetEdit(nodes={name: _record(row) for name, row in rows.items()}, memory=memory)
            yield edit
            for name, rec in edit.nodes.items():
                row = rows.get(name)
                if row is None:
                    session.add(
                        NodeRow(
                            name=rec.name,
                            cluster=rec.cluster,
                            gpu_type=rec.gpu_type,
                            gpus=rec.gpus,
                            labels={},
                            state=rec.state.value,
                            forced=rec.forced,
                            reason=rec.reason,
                            updated_at=rec.updated_at,
                            cpus=rec.cpus,
                            memory_mib=rec.memory,
                        )
                    )
                else:
                    _write(row, rec)
            set_state(session, key, edit.memory)
