"""Kueue-like baseline: nominal quotas from allocations, borrowing idle quota, reclaiming borrowed quota by
preemption, dominant-resource-share order of admission, lower-priority preemption within a queue, and drains that
evict everything."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allotment.core.model import Job, NodeState
from allotment.policies.common import Frame
from allotment.policies.kueue import Heads, Quotas, nominal_quotas
from tests.core.builders import World, two_team_world
from tests.policies.helpers import decide

N0, N1, N2, N3 = (f"c1-h100-0{i}" for i in range(4))
POOL = ("c1", "H100")


def three_teams() -> World:
    """org → {blue, green, red}, equal allocations, 4 × 8 GPUs: nominal quotas 11, 11, 10 (largest remainder)."""
    return (
        World()
        .cluster("c1")
        .budget("org", alloc=3000)
        .budget("red", "org")
        .budget("blue", "org")
        .budget("green", "org")
    )


def test_nominal_quotas_add_up_to_the_pool_by_largest_remainder() -> None:
    quotas = nominal_quotas(["blue", "green", "red"], {"blue": 1 / 3, "green": 1 / 3, "red": 1 / 3}, {POOL: 32})
    assert quotas == {"blue": {POOL: 11}, "green": {POOL: 11}, "red": {POOL: 10}}


@dataclass(frozen=True)
class Case:
    name: str
    world: Callable[[], World]
    started: set[str]
    preempted: dict[str, str] = field(default_factory=dict)
    blockers: dict[str, str] = field(default_factory=dict)


CASES = [
    Case(
        "a queue borrows the cohort's idle quota",
        lambda: two_team_world().pending("r1", "red", 8).pending("r2", "red", 8).pending("r3", "red", 8),
        started={"r1", "r2", "r3"},
    ),
    Case(
        "a queue within its nominal quota reclaims borrowed quota: the most recently started borrowed job leaves",
        lambda: (
            two_team_world()
            .running("r0", "red", {N0: 8}, started=0)
            .running("r1", "red", {N1: 8}, started=10)
            .running("r2", "red", {N2: 8}, started=20)
            .running("r3", "red", {N3: 8}, started=30)
            .pending("b", "blue", 8)
        ),
        started=set(),
        preempted={"r3": "fair-share"},
        blockers={"b": "waiting-for-grace"},
    ),
    Case(
        "work within its nominal quota is not preempted for a borrower",
        lambda: (
            two_team_world()
            .running("r0", "red", {N0: 8})
            .running("r1", "red", {N1: 8})
            .running("b0", "blue", {N2: 8})
            .running("b1", "blue", {N3: 8})
            .pending("b2", "blue", 8)
        ),
        started=set(),
        blockers={"b2": "capacity"},
    ),
    Case(
        "the queue that borrows most gives way, not one within its quota",
        lambda: (
            three_teams()
            .running("r0", "red", {N0: 8}, started=0)
            .running("r1", "red", {N1: 8}, started=10)
            .running("r2", "red", {N2: 8}, started=20)
            .running("b0", "blue", {N3: 8}, started=50)
            .pending("g", "green", 8)
        ),
        started=set(),
        preempted={"r2": "fair-share"},
    ),
    Case(
        "the queue with the lower dominant resource share is admitted first",
        lambda: (
            two_team_world()
            .running("r0", "red", {N0: 8})
            .running("r1", "red", {N1: 8})
            .running("r2", "red", {N2: 8})
            .pending("red-old", "red", 8, submitted_at=0)
            .pending("blue-new", "blue", 8, submitted_at=50)
        ),
        started={"blue-new"},
        blockers={"red-old": "capacity"},
    ),
    Case(
        "inside its own queue a higher priority preempts lower-priority work",
        lambda: (
            two_team_world()
            .running("r-low", "red", {N0: 8}, priority=0)
            .running("r-mid", "red", {N1: 8}, priority=1)
            .running("b0", "blue", {N2: 8})
            .running("b1", "blue", {N3: 8})
            .pending("r-high", "red", 8, priority=5)
        ),
        started=set(),
        preempted={"r-low": "fair-share"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kueue_cases(case: Case) -> None:
    out = decide("kueue", case.world())
    assert set(out.started) == case.started
    assert out.preempted == case.preempted
    for job, blocker in case.blockers.items():
        assert out.blocker(job) == blocker


def test_a_node_drain_evicts_every_workload_on_it() -> None:
    w = two_team_world(2).running("a", "red", {N0: 4}).running("b", "blue", {N0: 4}).running("c", "red", {N1: 8})
    w.node_state(N0, NodeState.DRAINING)
    assert decide("kueue", w).preempted == {"a": "drain", "b": "drain"}


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=4), min_size=1, max_size=4),
    changes=st.lists(st.tuples(st.integers(0, 3), st.integers(-16, 24)), max_size=12),
)
def test_the_head_order_is_a_fresh_minimum_each_time(sizes: list[list[int]], changes: list[tuple[int, int]]) -> None:
    # queues q0..qN (nominal quotas of a few GPUs on 16) with jobs of these sizes; after each head, some queue's
    # usage moves (a start, or work told to leave): Heads must give the same order as taking the minimum (DRS with
    # its head, name) afresh each time
    names = [f"q{i}" for i in range(len(sizes))]
    world = World().cluster("c1", nodes=2).budget("org", alloc=1000 * len(names))
    for name in names:
        world = world.budget(name, "org")
    for name, jobs in zip(names, sizes, strict=True):
        for j, gpus in enumerate(jobs):
            world = world.pending(f"{name}-{j}", name, gpus)
    snapshot = world.snapshot()

    def run(fresh: bool) -> list[str]:
        frame = Frame(snapshot, 0)
        quotas = Quotas(frame, snapshot)
        queues: dict[str, list[Job]] = {}
        for job in snapshot.jobs:
            queues.setdefault(job.budget, []).append(job)
        steps = iter(changes)
        order: list[str] = []
        heads = Heads(frame, quotas, queues) if not fresh else None
        nxt = dict.fromkeys(queues, 0)
        while True:
            if heads is not None:
                head = heads.pop()
            else:
                ready = [n for n in queues if nxt[n] < len(queues[n])]
                head = None
                if ready:

                    def key(n: str) -> tuple[float, str]:
                        job = queues[n][nxt[n]]
                        return (quotas.drs(n, POOL, job.total_gpus), n)

                    best = min(ready, key=key)
                    head = queues[best][nxt[best]]
                    nxt[best] += 1
            if head is None:
                return order
            order.append(head.id)
            step = next(steps, None)
            if step is not None:
                queue = names[step[0] % len(names)]
                quotas.add(queue, POOL, max(step[1], -quotas.usage.get(queue, {}).get(POOL, 0)))
            if heads is not None:
                heads.refresh(head.budget)

    assert run(fresh=False) == run(fresh=True)
