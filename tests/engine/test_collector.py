"""The engine decides and applies with Python's cyclic garbage collector paused, and always restores it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from allotment.core.decisions import Decisions
from allotment.core.model import Seconds, Snapshot
from allotment.core.policy import Policy
from allotment.engine.collector import collector_paused
from tests.engine.rig import Rig


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_on")
def test_the_collector_is_paused_inside_and_running_again_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_the_collector_runs_again_after_an_error_in_the_block() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the cycle failed")
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_a_nested_pause_ends_with_the_outer_one() -> None:
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


class _Watching:
    """The Allotment policy, noting whether the collector ran while it decided."""

    name = "watching"

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.seen: list[bool] = []

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        self.seen.append(gc.isenabled())
        return self.inner.decide(snapshot, now)


@pytest.mark.usefixtures("collector_on")
def test_an_engine_step_decides_with_the_collector_paused_and_restores_it(db: Engine) -> None:
    rig = Rig(db)
    watching = _Watching(rig.engine.policy)
    rig.engine.policy = watching
    rig.submit("a", gpus=8)
    rig.step()
    assert rig.state("a") == "running"
    assert watching.seen == [False]
    assert gc.isenabled()
