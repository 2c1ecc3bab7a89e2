"""Small fluent builders for the core's tests: a world of clusters, budgets and jobs, turned into a Snapshot."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from allotment.core.model import (
    MICRO_PER_CREDIT,
    Account,
    Allocation,
    Budget,
    CapacityWindow,
    Cluster,
    ContractClass,
    Job,
    JobKind,
    Node,
    NodeState,
    PolicyConfig,
    Preemption,
    Reservation,
    Run,
    RunClass,
    SessionRoom,
    Snapshot,
)

HOUR = 3600
DEFAULT_RATES = {"H100": MICRO_PER_CREDIT, "B200": 1_600_000, "B300": 2 * MICRO_PER_CREDIT}


def credits(n: float) -> int:
    return round(n * MICRO_PER_CREDIT)


class World:
    """A mutable description of a fleet, an organisation and its jobs; `.snapshot()` freezes it."""

    def __init__(self) -> None:
        self.clusters: list[Cluster] = []
        self.nodes: list[Node] = []
        self.budgets: list[Budget] = []
        self.accounts: dict[str, Account] = {}
        self.jobs: dict[str, Job] = {}
        self.windows: list[CapacityWindow] = []
        self.reservations: list[Reservation] = []
        self.rates = dict(DEFAULT_RATES)
        self.pol = PolicyConfig(default_headroom=0, min_slice=1800, max_slice=8 * HOUR)
        self.rooms: dict[str, SessionRoom] = {}

    # -- fleet -------------------------------------------------------------------------------------------------
    def cluster(
        self,
        name: str,
        nodes: int = 4,
        gpus: int = 8,
        gpu_type: str = "H100",
        rack_size: int = 2,
        block_size: int = 2,
        cpus: int = 0,
        memory: int = 0,
    ) -> World:
        """`nodes` nodes of `gpus` GPUs each, declaring `cpus` CPUs and `memory` MiB (0: not declared)."""
        self.clusters.append(Cluster(name, ("rack", "block")))
        base = sum(1 for n in self.nodes if n.cluster == name)
        for i in range(base, base + nodes):
            rack = i // rack_size
            labels = (("rack", f"{name}-r{rack}"), ("block", f"{name}-b{rack // block_size}"))
            node = Node(f"{name}-{gpu_type.lower()}-{i:02d}", name, gpu_type, gpus, labels, cpus=cpus, memory=memory)
            self.nodes.append(node)
        return self

    def node_state(self, name: str, state: NodeState, forced: bool = False) -> World:
        self.nodes = [replace(n, state=state, forced=forced) if n.name == name else n for n in self.nodes]
        return self

    def room(self, cluster: str, gpus: int, whole: int = 0) -> World:
        """The cluster's session room as the shell would size it (Snapshot.room)."""
        self.rooms[cluster] = SessionRoom(gpus, whole)
        return self

    def policy(self, **kw: Any) -> World:
        self.pol = replace(self.pol, **kw)
        return self

    # -- organisation ------------------------------------------------------------------------------------------
    def budget(
        self,
        name: str,
        parent: str | None = None,
        alloc: float = 1000.0,
        balance: float | None = None,
        usage: float = 0.0,
        max_gpus: int | None = None,
    ) -> World:
        self.budgets.append(Budget(name, parent, credits(alloc), max_gpus))
        self.accounts[name] = Account(credits(alloc if balance is None else balance), usage)
        return self

    def window(
        self, wid: str, budget: str, cluster: str, gpus: int, start: int, end: int, gpu_type: str = "H100"
    ) -> World:
        self.windows.append(CapacityWindow(wid, budget, cluster, gpu_type, gpus, start, end))
        return self

    # -- jobs --------------------------------------------------------------------------------------------------
    def pending(self, jid: str, budget: str, gpus: int = 1, **kw: Any) -> World:
        self.jobs[jid] = Job(jid, budget, kw.pop("user", f"u-{budget}"), gpus, **kw)
        return self

    def session(self, jid: str, budget: str, gpus: int = 1, length: int = 2 * HOUR, **kw: Any) -> World:
        return self.pending(jid, budget, gpus, kind=JobKind.SESSION, slice_seconds=length, **kw)

    def running(
        self,
        jid: str,
        budget: str,
        on: dict[str, int] | dict[str, tuple[int, ...]],
        started: int = 0,
        slice_end: int | None = None,
        run_class: RunClass | None = None,
        leaving_until: int | None = None,
        idle_since: int | None = None,
        checkpoint_at: int | None = None,
        checkpoint_every: int | None = None,
        **kw: Any,
    ) -> World:
        allocs: list[Allocation] = []
        for node, spec in on.items():
            if isinstance(spec, int):
                used = {
                    g for j in self.jobs.values() if j.run for a in j.run.placement if a.node == node for g in a.gpus
                }
                free = [g for g in range(64) if g not in used][:spec]
                allocs.append(Allocation(node, tuple(free)))
            else:
                allocs.append(Allocation(node, spec))
        total = sum(len(a.gpus) for a in allocs)
        contract = kw.get("contract", ContractClass.GUARANTEED)
        kind = kw.get("kind", JobKind.BATCH)
        if run_class is None:
            if kind is JobKind.SESSION:
                run_class = RunClass.SESSION
            elif contract is ContractClass.OPPORTUNISTIC or slice_end is None:
                run_class = RunClass.OPPORTUNISTIC
            else:
                run_class = RunClass.GUARANTEED
        preemption = None if leaving_until is None else Preemption(started, leaving_until, "test")
        run = Run(
            tuple(allocs),
            started,
            run_class,
            slice_end,
            preemption,
            idle_since,
            checkpoint_at=checkpoint_at,
            checkpoint_every=checkpoint_every,
        )
        per_replica = kw.pop("gpus", total)
        self.jobs[jid] = Job(jid, budget, kw.pop("user", f"u-{budget}"), per_replica, run=run, **kw)
        return self

    def reserve(self, r: Reservation) -> World:
        self.reservations.append(r)
        return self

    def snapshot(self) -> Snapshot:
        return Snapshot(
            clusters=tuple(self.clusters),
            nodes=tuple(self.nodes),
            rates=dict(self.rates),
            budgets=tuple(self.budgets),
            accounts=dict(self.accounts),
            jobs=tuple(self.jobs.values()),
            windows=tuple(self.windows),
            reservations=tuple(self.reservations),
            policy=self.pol,
            room=dict(self.rooms),
        )


def two_team_world(nodes: int = 4) -> World:
    """org → {red, blue} with equal allocations, one H100 cluster."""
    return (
        World()
        .cluster("c1", nodes=nodes)
        .budget("org", alloc=2000)
        .budget("red", "org", alloc=1000)
        .budget("blue", "org", alloc=1000)
    )
