"""The backfill timeline's earliest start: one pass over a node's availability steps gives the first time from which
the GPUs stay free for the whole span, as trying every step time in turn does; and remembering, within a cycle, the
job shapes shown to have no planned start never changes a planned start (one node or k whole nodes, bounded spans or
for ever), whatever starts and plans take GPUs in between."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allotment.policies.common import Frame
from allotment.policies.timeline import Timeline, earliest_start
from tests.core.builders import HOUR, World


def _by_trying_every_time(times: list[int], levels: list[int], gpus: int, duration: int | None) -> int | None:
    for j, t in enumerate(times):
        end = None if duration is None else t + duration
        if all(levels[k] >= gpus for k in range(j, len(times)) if k == j or end is None or times[k] < end):
            return t
    return None


@st.composite
def _steps(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    gaps = draw(st.lists(st.integers(1, 50), min_size=0, max_size=8))
    times = [0]
    for g in gaps:
        times.append(times[-1] + g)
    levels = draw(st.lists(st.integers(0, 8), min_size=len(times), max_size=len(times)))
    return times, levels


@given(_steps(), st.integers(1, 8), st.none() | st.integers(1, 120))
def test_one_pass_finds_the_first_time_the_gpus_stay_free_for_the_span(
    steps: tuple[list[int], list[int]], gpus: int, duration: int | None
) -> None:
    times, levels = steps
    assert earliest_start(times, levels, gpus, duration) == _by_trying_every_time(times, levels, gpus, duration)


CASES = [
    # (name, times, levels, gpus, duration, expected)
    ("free now for ever", [0, 10], [8, 8], 8, None, 0),
    ("a dip inside the span pushes the start past it", [0, 10, 20], [8, 2, 8], 8, 15, 20),
    ("a dip after the span does not matter", [0, 10, 20], [8, 8, 2], 8, 20, 0),
    ("a span ending exactly at the dip fits", [0, 10], [8, 0], 8, 10, 0),
    ("for ever never fits before a later dip", [0, 10, 20], [8, 8, 2], 8, None, None),
    ("never enough GPUs", [0, 10], [3, 4], 5, 5, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "times", "levels", "gpus", "duration", "expected"), CASES, ids=[c[0] for c in CASES])
def test_earliest_start_cases(
    name: str, times: list[int], levels: list[int], gpus: int, duration: int | None, expected: int | None
) -> None:
    assert earliest_start(times, levels, gpus, duration) == expected


NOW = 1_000
SHAPES = [(g, r, limit) for g in (1, 2, 4, 8) for r in (1, 2, 3) for limit in (None, HOUR, 3 * HOUR)]
"""(GPUs per replica, replicas, time limit): one node, whole nodes of both sizes, bounded and unbounded spans."""


@st.composite
def _world(draw: st.DrawFn) -> tuple[World, list[str], list[bool]]:
    """Two clusters (8- and 4-GPU nodes) partly busy with work that ends at known times or never, and a queue of
    jobs of few shapes (so shapes repeat); for each queued job, whether it starts now where it fits."""
    world = World().cluster("c1", nodes=draw(st.integers(1, 4))).cluster("c2", nodes=draw(st.integers(0, 3)), gpus=4)
    world.budget("org", alloc=2000).budget("team", "org", alloc=1000)
    for n, node in enumerate(world.nodes):
        free = node.gpus
        for r in range(draw(st.integers(0, 2))):
            gpus = draw(st.integers(0, free))
            if gpus:
                free -= gpus
                limit = draw(st.none() | st.integers(1, 6).map(lambda h: h * HOUR))
                started = draw(st.integers(0, NOW))
                world.running(f"r{n}-{r}", "team", {node.name: gpus}, started=started, max_runtime=limit)
    queue = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=14))
    for q, (gpus, replicas, limit) in enumerate(queue):
        world.pending(f"p{q}", "team", gpus, replicas=replicas, max_runtime=limit, submitted_at=q)
    order = [f"p{q}" for q in range(len(queue))]
    return world, order, draw(st.lists(st.booleans(), min_size=len(queue), max_size=len(queue)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_world())
def test_remembering_shapes_without_a_planned_start_never_changes_a_plan(
    drawn: tuple[World, list[str], list[bool]],
) -> None:
    world, order, start_now = drawn
    snapshot = world.snapshot()
    jobs = {j.id: j for j in snapshot.jobs}
    timeline = Timeline(Frame(snapshot, NOW))
    for jid, start in zip(order, start_now, strict=True):
        job = jobs[jid]
        here = [i for i in timeline.free if start and job.replicas == 1 and timeline.fits_now(job, i, job.gpus)]
        if here:
            timeline.take(here[0], job.gpus, timeline.frame.end_if_started(job))
            continue
        planned = timeline.plan(job)
        assert planned == timeline.search(job)
        if planned is not None:
            timeline.hold(planned, timeline.span(job))
