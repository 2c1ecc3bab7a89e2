"""The slice-funding rule (docs/policy.md §6) at the edges the mutation run over core/funding.py found no test for
(issue 19). Each table row is a small world built with tests/core/builders.py and the one decision the promises
allow on it: what starts, with which slice end, and the blocker of every job that waits (promise 10).

The wait reason of a job passed over on the fast path, found by the funding rule alone: for money only where the
job would run nowhere else (not an opportunistic job, nor a guaranteed one that accepts running opportunistically),
against the cheapest of its pools' prices, and, on a pool with a capacity window, the reason its terms give. Two
jobs kept waiting for different reasons with no pool to offer (money and a window) keep their own reasons, in
either order; and a job fits the smaller ready node of a pool whose larger node takes no work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from allotment.core.decisions import Blocker
from allotment.core.model import NodeState
from tests.core.builders import HOUR, World
from tests.core.test_promise_boundaries import NODE, OPP, Funding, one_node
from tests.core.test_promise_boundaries import test_slices_at_the_edges_of_the_money as check_slices

NODE_1 = "c1-h100-01"
B200_NODE = "c2-b200-00"


# -- jobs passed over on the fast path ---------------------------------------------------------------------------


def _passed_over(balance: float, window: bool = False, **second: object) -> Callable[[], World]:
    """One 8-GPU node held inside a slice; red (with `balance` credits) has a 1-GPU job that tries preemption and
    planning, so its second, 2-GPU job of one hour (2 credits) is passed over on the fast path. With `window`, another
    budget's 4-GPU window on the node opens in 10 hours (it shortens no slice of an hour)."""

    def world() -> World:
        w = one_node("red", "blue", "win", red=balance)
        if window:
            w.window("w1", "win", "c1", gpus=4, start=100 + 10 * HOUR, end=100 + 20 * HOUR)
        w.running("in-slice", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR)
        w.pending("first", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)
        return w.pending("second", "red", gpus=2, slice_seconds=HOUR, submitted_at=1, **second)

    return world


def _passed_over_on_two_prices(balance: float) -> Callable[[], World]:
    """An H100 node and a B200 node, both held inside slices; red's first job (H100 only) tries preemption and
    planning, its second, a 1-GPU job of one hour on either type (1 or 1.6 credits), is passed over."""

    def world() -> World:
        w = World().cluster("c1", nodes=1).cluster("c2", nodes=1, gpu_type="B200")
        w.budget("red", balance=balance).budget("blue")
        w.running("in-slice", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR)
        w.running("in-slice-b200", "blue", {B200_NODE: 8}, started=0, slice_end=5 * HOUR)
        w.pending("first", "red", gpus=1, slice_seconds=HOUR, submitted_at=0, gpu_types=("H100",))
        return w.pending("second", "red", gpus=1, slice_seconds=HOUR, submitted_at=1, gpu_types=("H100", "B200"))

    return world


PASSED_OVER = [
    Funding("guaranteed-short-of-money", _passed_over(1), 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.FUNDS}),
    Funding("opportunistic-short-of-money", _passed_over(1, contract=OPP), 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.CAPACITY}),
    Funding("fallback-short-of-money", _passed_over(1, fallback_opportunistic=True), 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.CAPACITY}),
    Funding("money-for-the-cheaper-of-two-prices", _passed_over_on_two_prices(1.5), 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.CAPACITY}),
    Funding("before-a-window-short-of-money", _passed_over(1, window=True), 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.FUNDS}),
    Funding("before-a-window-with-exactly-the-money", _passed_over(2, window=True), 100, {},
            {"first": Blocker.CAPACITY, "second": Blocker.CAPACITY}),
]  # fmt: skip


@pytest.mark.parametrize("case", PASSED_OVER, ids=str)
def test_wait_reasons_of_jobs_passed_over_on_the_fast_path(case: Funding) -> None:
    """Promise 10: a job passed over waits for money only when its budget cannot pay for a slice on its cheapest
    pool and it would not run opportunistically instead; where its pool has a window, for what its terms say."""
    check_slices(case)


# -- terms with no pool ------------------------------------------------------------------------------------------


def _one_short_of_money_one_refused_by_a_window(money_first: bool) -> Callable[[], World]:
    """Red (10 credits) asks for a whole H100 node for 8 hours (64 credits) and for one B200 GPU for an hour, whose
    node another budget's window takes in 1000 s (less than min_slice). Neither can start; `money_first` says
    which is decided first."""

    def world() -> World:
        w = World().cluster("c1", nodes=1).cluster("c2", nodes=1, gpu_type="B200")
        w.budget("red", balance=10).budget("win")
        w.window("w1", "win", "c2", gpus=8, start=100 + 1000, end=100 + 10 * HOUR, gpu_type="B200")
        dear, windowed = (2, 1) if money_first else (1, 2)
        w.pending("dear", "red", gpus=8, slice_seconds=8 * HOUR, submitted_at=0, gpu_types=("H100",), priority=dear)
        return w.pending("windowed", "red", gpus=1, submitted_at=0, gpu_types=("B200",), priority=windowed)

    return world


def _beside_a_larger_node_that_takes_no_work() -> World:
    # c1's H100 pool holds a cordoned 8-GPU node and a ready 4-GPU one: a 4-GPU job fits the ready node
    w = World().cluster("c1", nodes=2).budget("red").node_state(NODE, NodeState.CORDONED)
    w.nodes = [replace(n, gpus=4) if n.name == NODE_1 else n for n in w.nodes]
    return w.pending("four", "red", gpus=4, slice_seconds=HOUR, submitted_at=0)


TERMS = [
    Funding("short-of-money-then-refused-by-a-window", _one_short_of_money_one_refused_by_a_window(True), 100, {},
            {"dear": Blocker.FUNDS, "windowed": Blocker.WINDOW}),
    Funding("refused-by-a-window-then-short-of-money", _one_short_of_money_one_refused_by_a_window(False), 100, {},
            {"dear": Blocker.FUNDS, "windowed": Blocker.WINDOW}),
    Funding("beside-a-larger-node-that-takes-no-work", _beside_a_larger_node_that_takes_no_work, 100,
            {"four": 100 + HOUR}, {}),
]  # fmt: skip


@pytest.mark.parametrize("case", TERMS, ids=str)
def test_terms_of_jobs_with_one_pool_each(case: Funding) -> None:
    """Promises 2 and 10: each job's own slice, or its own reason for having none."""
    check_slices(case)
