"""decide() leaves no reference cycles behind: everything a cycle builds (its state, rankings, claims and the
closures they keep) is freed by reference counting when decide() returns, so Python's cyclic collector has nothing
of it to find (CycleState.release; the engine pauses that collector during a cycle: engine/collector.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import Seconds, Snapshot
from tests.core.test_equivalence import build_cases

CASES = build_cases()


@pytest.fixture
def collector_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if was:
        gc.enable()


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize(("snapshot", "now"), [(s, t) for _, s, t in CASES], ids=[n for n, _, _ in CASES])
def test_a_cycle_leaves_nothing_for_the_cyclic_collector(snapshot: Snapshot, now: Seconds) -> None:
    decisions = AllotmentPolicy().decide(snapshot, now)
    assert decisions.starts or decisions.pending or decisions.renews  # the case did some work
    del decisions
    assert gc.collect() == 0
