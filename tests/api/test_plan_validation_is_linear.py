"""Checking and applying a budget plan costs time linear in the plan's size: doubling a plan (a chain of new
budgets, the worst case for walking up the tree) at most doubles the Python lines executed, counted with a trace
function — an operation count, not a timing. The old checks walked every budget's ancestors and rebuilt the set of
planned names per new budget: quadratic, so the count quadrupled."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from allotment.service.context import Context
from allotment.service.plans import apply_plan, diff_plan, plan_from_data
from allotment.service.principal import Principal, load_principal
from tests.api.conftest import Api

SMALL, LARGE = 300, 600
LINEAR_BOUND = 2.5
"""Lines(LARGE) / Lines(SMALL): 2 for linear work, 4 for quadratic; the bound leaves room for fixed costs."""


def chain(n: int) -> dict[str, Any]:
    """n new budgets, each under the previous one, listed deepest first (so nothing can be created in list order)."""
    budgets = [
        {"name": f"n{n}-{i}", "parent": "language" if i == 0 else f"n{n}-{i - 1}", "allocation": 0} for i in range(n)
    ]
    return {"period": "2026-11-01", "why": "a deep tree", "budgets": budgets[::-1]}


def lines_run(work: Callable[[], object]) -> int:
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def diff(ctx: Context, who: Principal, n: int) -> Callable[[], object]:
    doc = plan_from_data(chain(n))
    return lambda: diff_plan(ctx, who, doc)


def apply(ctx: Context, who: Principal, n: int) -> Callable[[], object]:
    doc = plan_from_data(chain(n))
    return lambda: apply_plan(ctx, who, doc)


@pytest.mark.parametrize(
    ("use_case", "lead"),
    [
        pytest.param(diff, "ben", id="diff-by-a-lead"),
        pytest.param(diff, "ada", id="diff-by-an-admin"),
        pytest.param(apply, "ben", id="apply-by-a-lead"),
    ],
)
def test_doubling_a_plan_at_most_doubles_the_work(
    api: Api, use_case: Callable[[Context, Principal, int], Callable[[], object]], lead: str
) -> None:
    api.rig.step()  # the period opens, as on a server
    with api.rig.sessions() as session:
        who = load_principal(session, lead)
    counts = []
    for n in (SMALL, LARGE):
        work = use_case(api.ctx, who, n)
        counts.append(lines_run(work))
    assert counts[1] / counts[0] < LINEAR_BOUND, counts
