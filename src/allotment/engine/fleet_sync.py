"""Keeping Allotment's node table and an external cluster manager (Slurm) in step, both ways.

Owns: `FleetSync.sync()` — discovery (nodes the manager has and the table lacks are added to the configured
cluster, with the manager's GPU count; table nodes of that cluster the manager does not have are kept DOWN) and
state sync (a node the manager reports DOWN or DRAIN becomes DOWN or DRAINING here; a drain, cordon or down an
Allotment operator sets is written to the manager) — and `SyncedExecutor`, which runs that sync from the engine's
own poll of the executor (at most every `every` seconds, and at once when a job was lost), so every cycle sees fresh
node states without the engine knowing about Slurm.

It talks through ports only: the manager is a FleetSource (ports/fleet.py; SlurmExecutor is one), the node table
and the sync's memory are a FleetSyncStore's FleetEdit (store/fleet_sync_store.py on SQL), one transaction per sync.

Must not: decide what to preempt (the core reacts to the node states), change anything but node records and its
own memory (`fleet_sync:<cluster>` in the engine key/value table), or name an adapter (import-linter forbids it).

Who wins: the sync remembers, per node, the Allotment state and the manager state it last agreed on. A side that
changed since then is copied to the other; when both changed, Allotment's operator wins (its change is written to
the manager). After writing to the manager, what the manager reports is ignored for `settle` seconds (a resumed
Slurm node reads NOT_RESPONDING for about a second before its slurmd registers again).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from allotment.core.model import NodeState
from allotment.ports.clock import Clock
from allotment.ports.executor import EventKind, Executor, ExecutorEvent, LaunchSpec
from allotment.ports.fleet import (
    DiscoveredNode,
    FleetEdit,
    FleetSource,
    FleetSyncStore,
    NodeAction,
    NodeRecord,
    action_for,
)

log = logging.getLogger("allotment.fleet_sync")

MISSING_REASON = "not a node of the cluster manager"
"""Reason recorded on a configured node the manager does not know (it is kept DOWN)."""

EXPECTED: Mapping[NodeAction, NodeState] = {
    "drain": NodeState.DRAINING,
    "down": NodeState.DOWN,
    "resume": NodeState.READY,
}
"""How the manager reports a node after each action (a manager has no cordon: a cordon is a drain there)."""

Memory = dict[str, dict[str, Any]]
"""node → the states both sides last agreed on, and when Allotment last wrote to the manager (JSON-shaped)."""


@dataclass
class SyncReport:
    added: list[str] = field(default_factory=list)
    pulled: dict[str, str] = field(default_factory=dict)
    """node → the state copied from the manager."""
    pushed: dict[str, str] = field(default_factory=dict)
    """node → the action written to the manager."""
    missing: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """node → why writing to the manager failed (retried at the next sync)."""


@dataclass
class FleetSync:
    store: FleetSyncStore
    manager: FleetSource
    cluster: str
    gpu_type: str
    settle: int = 15

    @property
    def key(self) -> str:
        return f"fleet_sync:{self.cluster}"

    def sync(self, now: int) -> SyncReport:
        found = {d.node.name: d for d in self.manager.discover_nodes()}
        report = SyncReport()
        with self.store.edit(self.key) as edit:
            rows = dict(edit.nodes)
            memory = edit.memory
            for name, d in sorted(found.items()):
                row = rows.get(name)
                if row is None:
                    self._add(edit, d, now)
                    memory[name] = _memo(d.node.state, d.node.state)
                    report.added.append(name)
                elif row.cluster == self.cluster:
                    if (row.gpus, row.cpus, row.memory) != (d.node.gpus, d.node.cpus, d.node.memory):
                        row.gpus, row.cpus, row.memory, row.updated_at = d.node.gpus, d.node.cpus, d.node.memory, now
                    self._node(row, d, memory, now, report)
                else:
                    log.warning("node %s of the manager belongs to cluster %s here; not synced", name, row.cluster)
            for name, row in sorted(rows.items()):
                if row.cluster == self.cluster and name not in found and row.state is not NodeState.DOWN:
                    row.state, row.forced, row.reason, row.updated_at = NodeState.DOWN, False, MISSING_REASON, now
                    report.missing.append(name)
        if report.added or report.pulled or report.pushed or report.missing or report.failed:
            log.info("fleet sync %s: %s", self.cluster, report)
        return report

    def _add(self, edit: FleetEdit, d: DiscoveredNode, now: int) -> None:
        edit.add(
            NodeRecord(
                name=d.node.name,
                cluster=self.cluster,
                gpu_type=self.gpu_type,
                gpus=d.node.gpus,
                state=d.node.state,
                forced=False,
                reason=self._reason(d),
                updated_at=now,
                cpus=d.node.cpus,
                memory=d.node.memory,
            )
        )

    def _node(self, row: NodeRecord, d: DiscoveredNode, memory: Memory, now: int, report: SyncReport) -> None:
        mine, theirs = row.state, d.node.state
        memo = memory.get(row.name)
        if memo is None:
            # First meeting: hardware trouble in the manager wins, then any Allotment drain, then a manager drain.
            if theirs is NodeState.DOWN and mine is not NodeState.DOWN:
                self._pull(row, d, memory, now, report)
            elif mine is not NodeState.READY and theirs is NodeState.READY:
                self._push(row, memory, now, report)
            elif theirs is NodeState.DRAINING and mine is NodeState.READY:
                self._pull(row, d, memory, now, report)
            else:
                memory[row.name] = _memo(mine, theirs)
            return
        if mine.value != memo["allot"]:
            self._push(row, memory, now, report)
        elif theirs.value != memo["slurm"]:
            pushed_at = memo.get("pushed_at")
            if pushed_at is None or now - int(pushed_at) >= self.settle:
                self._pull(row, d, memory, now, report)

    def _pull(self, row: NodeRecord, d: DiscoveredNode, memory: Memory, now: int, report: SyncReport) -> None:
        state = d.node.state
        row.state, row.forced, row.reason, row.updated_at = state, False, self._reason(d), now
        memory[row.name] = _memo(state, state)
        report.pulled[row.name] = state.value

    def _push(self, row: NodeRecord, memory: Memory, now: int, report: SyncReport) -> None:
        mine = row.state
        action = action_for(mine)
        why = f"allotment: {row.reason or mine.value}"
        try:
            self.manager.set_node_state(row.name, action, why)
        except Exception as exc:  # the manager refused or is unreachable: try again next time
            report.failed[row.name] = str(exc)
            return
        memory[row.name] = {**_memo(mine, EXPECTED[action]), "pushed_at": now}
        report.pushed[row.name] = action

    def _reason(self, d: DiscoveredNode) -> str | None:
        if d.node.state is NodeState.READY:
            return None
        return f"{self.manager.manager_name} {d.manager_state}" + (f": {d.reason}" if d.reason else "")


def _memo(allot: NodeState, slurm: NodeState) -> dict[str, Any]:
    # The memory's keys ("allot", "slurm") are stored in the database: kept as they are for existing memories.
    return {"allot": allot.value, "slurm": slurm.value, "pushed_at": None}


class SyncedExecutor:
    """An Executor that runs a FleetSync after its inner executor's poll: at the first poll (a starting engine sees
    the manager's fleet before its first decision), then every `every` seconds, and whenever a job was lost."""

    def __init__(self, inner: Executor, sync: FleetSync, clock: Clock, every: float = 10.0) -> None:
        self.inner = inner
        self.fleet = sync
        self.clock = clock
        self.every = every
        self._last: int | None = None
        self.last_report: SyncReport | None = None

    def sync_now(self) -> SyncReport:
        now = self.clock.now()
        self._last = now
        self.last_report = self.fleet.sync(now)
        return self.last_report

    def launch(self, spec: LaunchSpec) -> None:
        self.inner.launch(spec)

    def terminate(self, job_id: str, attempt: int, grace: int) -> None:
        self.inner.terminate(job_id, attempt, grace)

    def poll(self) -> list[ExecutorEvent]:
        events = self.inner.poll()
        due = self._last is None or self.clock.now() - self._last >= self.every
        if due or any(e.kind is EventKind.LOST for e in events):
            # A lost job usually means a node in trouble: sync now, so the cycle that requeues the job already
            # knows the node's state and does not place the job there again.
            try:
                self.sync_now()
            except Exception:
                log.exception("fleet sync failed; the next poll tries again")
        return events

    def alive(self) -> Mapping[str, int]:
        return self.inner.alive()
