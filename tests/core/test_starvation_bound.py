"""The starvation bound of rule `planned-start` (`starvation_after`, default a day; the example lab sets a week,
decision 71): until a job has waited that long, another budget's slice work gives way to its planned start by fair
share alone; from then on it gives way whatever the standings, so no budget waits forever (promise 8).

One 8-GPU node: blue, with no usage, holds 8 GPUs of slice-expired work (its slice ended two hours ago and blue
cannot pay to renew it); red, far above its share, waits for all 8. Handing blue's GPUs to red would raise the
larger of the two standings, so only the bound can make blue's work give way.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from allotment.core.decisions import PreemptReason
from allotment.core.model import PolicyConfig
from tests.core.builders import HOUR, World
from tests.core.test_promise_boundaries import NODE, decide

DAY = 24 * HOUR
WEEK = 7 * DAY


@dataclass(frozen=True)
class Case:
    name: str
    waited: int
    """Seconds red's job has waited when the cycle runs."""
    bound: int | None
    """The policy's starvation_after (None: the default)."""
    gives_way: bool


CASES = [
    Case("an hour under the default bound leaves fair share in charge", DAY - HOUR, None, gives_way=False),
    Case("a day's wait takes the work under the default bound", DAY + HOUR, None, gives_way=True),
    Case("a day's wait leaves fair share in charge under a week's bound", DAY + HOUR, WEEK, gives_way=False),
    Case("six days' wait still does", 6 * DAY, WEEK, gives_way=False),
    Case("seven days' wait takes the work under a week's bound", WEEK, WEEK, gives_way=True),
]


def world(case: Case, now: int) -> World:
    w = World().cluster("c1", nodes=1).budget("red", usage=50_000.0).budget("blue", balance=0)
    if case.bound is not None:
        w.policy(starvation_after=case.bound)
    w.running("expired", "blue", {NODE: 8}, started=now - 3 * HOUR, slice_end=now - 2 * HOUR, grace=0)
    return w.pending("want", "red", gpus=8, submitted_at=now - case.waited)


def test_the_default_bound_is_a_day() -> None:
    assert PolicyConfig().starvation_after == DAY


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_slice_work_gives_way_by_fair_share_until_the_bound(case: Case) -> None:
    now = 10 * DAY
    d = decide(world(case, now).snapshot(), now)
    if case.gives_way:
        assert [(p.job_id, p.reason) for p in d.preempts] == [("expired", PreemptReason.RESERVATION)]
        assert [(r.job_id, r.planned_start) for r in d.reserves] == [("want", now)]
    else:
        assert d.preempts == ()
        assert d.reserves == ()
        assert d.starts == ()
