"""Capacity windows: slices end by a window's start on the GPUs it books; its budget reclaims the pool."""

from __future__ import annotations

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Blocker, PreemptReason
from allotment.core.model import RunClass
from tests.core.builders import HOUR, World

decide = AllotmentPolicy().decide


def world() -> World:
    # 2 nodes × 8 = 16 GPUs; "pre" books 8 of them from 2 h to 10 h
    return (
        World()
        .cluster("c1", nodes=2)
        .budget("org", alloc=4000)
        .budget("pre", "org")
        .budget("other", "org")
        .window("w1", "pre", "c1", gpus=8, start=2 * HOUR, end=10 * HOUR)
    )


def test_slices_that_would_crowd_out_a_window_end_at_its_start() -> None:
    w = (
        world()
        .pending("a", "other", gpus=8, slice_seconds=4 * HOUR)
        .pending("b", "other", gpus=8, slice_seconds=4 * HOUR)
    )
    d = decide(w.snapshot(), 0)
    ends = sorted(s.slice_end or 0 for s in d.starts)
    # the first 8 GPUs fit beside the window; the second 8 must be back by its start
    assert ends == [2 * HOUR, 4 * HOUR]


def test_a_slice_shorter_than_the_minimum_is_not_granted_before_a_window() -> None:
    w = world().running("x", "other", {"c1-h100-00": 8}, slice_end=9 * HOUR)
    w.pending("late", "other", gpus=8, slice_seconds=4 * HOUR)
    d = decide(w.snapshot(), 2 * HOUR - 600)  # 10 min before the window: less than the 30 min minimum slice
    assert d.starts == ()
    assert d.pending["late"].blocker is Blocker.WINDOW


def test_window_budget_reclaims_its_pool_at_the_start() -> None:
    w = world()
    w.running("x", "other", {"c1-h100-00": 8}, started=0, slice_end=9 * HOUR)
    w.running("y", "other", {"c1-h100-01": 8}, started=0, slice_end=2 * HOUR, run_class=RunClass.OPPORTUNISTIC)
    w.pending("train", "pre", gpus=8)
    d = decide(w.snapshot(), 2 * HOUR)
    assert [(p.job_id, p.reason, p.preemptor) for p in d.preempts] == [("y", PreemptReason.WINDOW, "train")]


def test_idle_window_gpus_are_lent_only_as_preemptible_work() -> None:
    w = world().running("x", "other", {"c1-h100-00": 8}, started=0, slice_end=9 * HOUR)
    w.pending("guaranteed", "other", gpus=8, fallback_opportunistic=True)
    d = decide(w.snapshot(), 3 * HOUR)
    (start,) = d.starts
    assert start.run_class is RunClass.OPPORTUNISTIC and start.slice_end is None
