"""Run slices: granted only when funded, renewed at their end under the same test, otherwise lapsing."""

from __future__ import annotations

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Blocker, HintKind
from allotment.core.model import ContractClass, RunClass
from tests.core.builders import HOUR, two_team_world

decide = AllotmentPolicy().decide


@pytest.mark.parametrize(
    ("name", "balance", "fallback", "expect"),
    [
        ("funded: slice granted", 100.0, False, RunClass.GUARANTEED),
        ("unfunded: waits for funds", 3.0, False, None),
        ("unfunded with fallback: runs opportunistic", 3.0, True, RunClass.OPPORTUNISTIC),
    ],
)
def test_slice_funding(name: str, balance: float, fallback: bool, expect: RunClass | None) -> None:
    # 4 H100 for 1 h = 4 credits
    w = two_team_world().budget("lean", "org", alloc=10, balance=balance)
    w.pending("j", "lean", gpus=4, slice_seconds=HOUR, fallback_opportunistic=fallback)
    d = decide(w.snapshot(), 0)
    if expect is None:
        assert d.starts == ()
        reason = d.pending["j"]
        assert reason.blocker is Blocker.FUNDS
        assert "3.0" in reason.message and "4.0" in reason.message
        hints = {h.kind: h.detail for h in reason.hints}
        assert set(hints) == {HintKind.OPPORTUNISTIC, HintKind.SHORTER_SLICE}
        assert "45 min" in hints[HintKind.SHORTER_SLICE]
    else:
        (start,) = d.starts
        assert start.run_class is expect
        assert (start.slice_end is None) == (expect is RunClass.OPPORTUNISTIC)


def test_commitments_of_running_slices_count_against_new_ones() -> None:
    # 10 credits; a running 8-GPU slice has 1 h left = 8 credits promised; a new 4-GPU 1 h slice (4) is not funded
    w = two_team_world().budget("lean", "org", alloc=10)
    w.running("r", "lean", {"c1-h100-00": 8}, slice_end=HOUR)
    w.pending("j", "lean", gpus=4, slice_seconds=HOUR)
    d = decide(w.snapshot(), 0)
    assert d.starts == ()
    assert d.pending["j"].blocker is Blocker.FUNDS


def test_slice_is_clamped_to_policy_bounds() -> None:
    w = two_team_world().pending("long", "red", slice_seconds=100 * HOUR).pending("short", "red", slice_seconds=60)
    d = decide(w.snapshot(), 0)
    ends = {s.job_id: s.slice_end for s in d.starts}
    assert ends == {"long": 8 * HOUR, "short": 1800}


def test_renewal_at_slice_end_when_funded() -> None:
    w = two_team_world().running("r", "red", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    d = decide(w.snapshot(), HOUR)
    assert [(r.job_id, r.slice_end) for r in d.renews] == [("r", 2 * HOUR)]
    assert d.lapses == () and d.preempts == ()


def test_lapse_when_budget_cannot_pay_for_the_next_slice() -> None:
    w = two_team_world().budget("lean", "org", alloc=10, balance=5)
    w.running("r", "lean", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    d = decide(w.snapshot(), HOUR)
    assert d.renews == ()
    assert [(lp.job_id, lp.why) for lp in d.lapses] == [("r", "budget cannot pay for another slice")]
    assert d.preempts == ()  # it runs on, preemptible


def test_opportunistic_jobs_never_get_a_slice() -> None:
    w = two_team_world().pending("o", "red", gpus=2, contract=ContractClass.OPPORTUNISTIC)
    (start,) = decide(w.snapshot(), 0).starts
    assert start.run_class is RunClass.OPPORTUNISTIC and start.slice_end is None
