"""The promises at their edges, as named fixed examples (issue 19): the cases a mutation run of funding, preemption
and capacity found no test for. Each table row is a small world built with tests/core/builders.py and the one
decision the promises allow on it.

Promise 1 (never inside a slice) when a capacity window opens on in-slice and lapsed work; promise 2 (a slice only
if its budget can pay for all of it) at exactly enough money, with one budget's money not leaking into another's
terms, and for a slice shortened to a window start; the victim choice on one node (several victims, no more than
needed; none when free and leaving GPUs already cover the need); a window never evicting its own budget's work; a
slice ending exactly now; and the fair-share rule at exactly the share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from allotment.core.capacity import Occupant
from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Blocker, PreemptReason
from allotment.core.model import Account, Allocation, ContractClass, Job, JobKind, Run, RunClass
from allotment.core.preemption import (
    expired_yields_to_under_share,
    is_opportunistic_work,
    is_slice_expired,
    reservation_claims,
    session_takes,
    victim_reason,
)
from tests.core.builders import HOUR, World, credits
from tests.core.test_properties_slices import check_no_preemption_in_slice

decide = AllotmentPolicy().decide
OPP = ContractClass.OPPORTUNISTIC
NODE = "c1-h100-00"


def one_node(*budgets: str, **balances: float) -> World:
    """One 8-GPU H100 node; the named budgets, each with 1000 credits unless given a balance."""
    w = World().cluster("c1", nodes=1)
    for b in budgets:
        w.budget(b, balance=balances.get(b))
    return w


@dataclass(frozen=True)
class Preemptions:
    """A world, the instant to decide at, and the (victim, reason) pairs the promises allow, in decision order."""

    name: str
    world: Callable[[], World]
    now: int
    victims: list[tuple[str, PreemptReason]]

    def __str__(self) -> str:
        return self.name


def _window_opens_on_in_slice_and_lapsed_work() -> World:
    # the in-slice job started later (less lost progress): were the guard gone, it would be the cheaper victim
    w = one_node("win", "blue").window("w1", "win", "c1", gpus=4, start=2 * HOUR, end=10 * HOUR)
    w.running("lapsed", "blue", {NODE: 4}, started=0, grace=60)
    w.running("in-slice", "blue", {NODE: 4}, started=HOUR, slice_end=3 * HOUR, grace=60)
    return w.pending("mine", "win", gpus=4, submitted_at=0)


def _window_opens_on_in_slice_and_opportunistic_work() -> World:
    w = one_node("win", "blue").window("w1", "win", "c1", gpus=4, start=2 * HOUR, end=10 * HOUR)
    w.running("opp", "blue", {NODE: 4}, started=0, contract=OPP, grace=60)
    w.running("in-slice", "blue", {NODE: 4}, started=HOUR, slice_end=3 * HOUR, grace=60)
    return w.pending("mine", "win", gpus=4, submitted_at=0)


def _window_opens_on_work_inside_slices_only() -> World:
    w = one_node("win", "blue").window("w1", "win", "c1", gpus=4, start=2 * HOUR, end=10 * HOUR)
    w.running("in-slice-a", "blue", {NODE: 4}, started=0, slice_end=2 * HOUR + 1, grace=60)
    w.running("in-slice-b", "blue", {NODE: 4}, started=HOUR, slice_end=3 * HOUR, grace=60)
    return w.pending("mine", "win", gpus=4, submitted_at=0)


def _window_keeps_its_own_budgets_work() -> World:
    # the window's budget's own lapsed job and another budget's in-slice job: the window takes neither
    w = one_node("win", "blue").window("w1", "win", "c1", gpus=8, start=2 * HOUR, end=10 * HOUR)
    w.running("own-lapsed", "win", {NODE: 4}, started=0, grace=60)
    w.running("in-slice", "blue", {NODE: 4}, started=HOUR, slice_end=2 * HOUR + 600, grace=60)
    return w.pending("mine", "win", gpus=8, submitted_at=0)


def _window_takes_the_other_budgets_work_not_its_own() -> World:
    w = one_node("win", "blue").window("w1", "win", "c1", gpus=8, start=2 * HOUR, end=10 * HOUR)
    w.running("own-lapsed", "win", {NODE: 4}, started=HOUR, grace=60)
    w.running("blue-lapsed", "blue", {NODE: 4}, started=0, grace=60)
    return w.pending("mine", "win", gpus=4, submitted_at=0)


def _three_and_one_for_four() -> World:
    # no single victim frees 4: the largest (3) and then the freshest 1-GPU job (not the first by id), not more
    w = one_node("red", "blue")
    w.running("opp3", "blue", {NODE: 3}, started=0, contract=OPP)
    w.running("opp1-a", "blue", {NODE: 1}, started=50, contract=OPP)
    w.running("opp1-b", "blue", {NODE: 1}, started=10, contract=OPP)
    w.running("in-slice", "blue", {NODE: 3}, started=0, slice_end=5 * HOUR)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _least_lost_progress_not_first_id() -> World:
    # two victims of one size: the one that loses less work goes, whatever the order of their ids
    w = one_node("red", "blue")
    w.running("a-old", "blue", {NODE: 4}, started=0, contract=OPP)
    w.running("b-fresh", "blue", {NODE: 4}, started=90, contract=OPP)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _started_a_second_ago_or_now() -> World:
    # one second of lost work is still more than none
    w = one_node("red", "blue")
    w.running("a-second-ago", "blue", {NODE: 4}, started=99, contract=OPP)
    w.running("b-now", "blue", {NODE: 4}, started=100, contract=OPP)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _least_lost_progress_across_nodes() -> World:
    w = World().cluster("c1", nodes=2).budget("red").budget("blue")
    w.running("a-old", "blue", {NODE: 8}, started=0, contract=OPP)
    w.running("b-fresh", "blue", {"c1-h100-01": 8}, started=90, contract=OPP)
    return w.pending("want", "red", gpus=8, submitted_at=0)


def _two_twos_for_four() -> World:
    w = one_node("red", "blue")
    w.running("opp2-a", "blue", {NODE: 2}, started=0, contract=OPP)
    w.running("opp2-b", "blue", {NODE: 2}, started=20, contract=OPP)
    w.running("opp1", "blue", {NODE: 1}, started=90, contract=OPP)
    w.running("in-slice", "blue", {NODE: 3}, started=0, slice_end=5 * HOUR)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _one_large_victim_rather_than_several() -> World:
    w = one_node("red", "blue")
    w.running("opp5", "blue", {NODE: 5}, started=0, contract=OPP)
    w.running("opp2", "blue", {NODE: 2}, started=90, contract=OPP)
    w.running("opp1", "blue", {NODE: 1}, started=90, contract=OPP)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _free_and_leaving_exactly_cover_the_need() -> World:
    w = one_node("red", "blue")
    w.running("leaving", "blue", {NODE: 2}, started=0, contract=OPP, leaving_until=130)
    w.running("opp", "blue", {NODE: 4}, started=90, contract=OPP)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _leaving_elsewhere_beats_a_fresh_victim() -> World:
    # node 0: 3 free and 1 leaving in 10 minutes; node 1: 3 free and a 1-GPU job started now, no grace. Waiting
    # for node 0 costs nobody anything: no preemption, even though node 1 could be ready sooner
    w = World().cluster("c1", nodes=2).budget("red").budget("blue")
    w.running("fill-0", "blue", {NODE: 4}, started=0, slice_end=5 * HOUR)
    w.running("leaving", "blue", {NODE: 1}, started=0, contract=OPP, leaving_until=700)
    w.running("fill-1", "blue", {"c1-h100-01": 4}, started=0, slice_end=5 * HOUR)
    w.running("fresh", "blue", {"c1-h100-01": 1}, started=100, contract=OPP, grace=0)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _free_and_leaving_one_short() -> World:
    w = one_node("red", "blue")
    w.running("leaving", "blue", {NODE: 2}, started=0, contract=OPP, leaving_until=130)
    w.running("opp", "blue", {NODE: 1}, started=90, contract=OPP)
    w.running("in-slice", "blue", {NODE: 4}, started=0, slice_end=5 * HOUR)
    return w.pending("want", "red", gpus=4, submitted_at=0)


def _lapsed_at_exactly_its_slice_end() -> World:
    # blue is far over its share and cannot renew; red has used nothing: at the slice end the job goes
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000)
    w.budget("red", "org").budget("blue", "org", balance=0.5, usage=5000)
    w.running("ends-now", "blue", {NODE: 8}, started=0, slice_end=HOUR, grace=60)
    return w.pending("want", "red", gpus=8, submitted_at=0)


def _one_second_before_the_slice_end() -> World:
    return _lapsed_at_exactly_its_slice_end()


PREEMPTIONS = [
    Preemptions("window-opens-lapsed-and-in-slice", _window_opens_on_in_slice_and_lapsed_work, 2 * HOUR,
                [("lapsed", PreemptReason.WINDOW)]),
    Preemptions("window-opens-opportunistic-and-in-slice", _window_opens_on_in_slice_and_opportunistic_work,
                2 * HOUR, [("opp", PreemptReason.WINDOW)]),
    Preemptions("window-opens-on-slices-only", _window_opens_on_work_inside_slices_only, 2 * HOUR, []),
    Preemptions("window-keeps-its-own-budgets-work", _window_keeps_its_own_budgets_work, 2 * HOUR, []),
    Preemptions("window-takes-others-not-its-own", _window_takes_the_other_budgets_work_not_its_own, 2 * HOUR,
                [("blue-lapsed", PreemptReason.WINDOW)]),
    Preemptions("three-and-one-for-four", _three_and_one_for_four, 100,
                [("opp3", PreemptReason.FOR_GUARANTEED), ("opp1-a", PreemptReason.FOR_GUARANTEED)]),
    Preemptions("least-lost-progress-not-first-id", _least_lost_progress_not_first_id, 100,
                [("b-fresh", PreemptReason.FOR_GUARANTEED)]),
    Preemptions("started-a-second-ago-or-now", _started_a_second_ago_or_now, 100,
                [("b-now", PreemptReason.FOR_GUARANTEED)]),
    Preemptions("least-lost-progress-across-nodes", _least_lost_progress_across_nodes, 100,
                [("b-fresh", PreemptReason.FOR_GUARANTEED)]),
    Preemptions("two-twos-for-four", _two_twos_for_four, 100,
                [("opp2-b", PreemptReason.FOR_GUARANTEED), ("opp2-a", PreemptReason.FOR_GUARANTEED)]),
    Preemptions("one-large-victim", _one_large_victim_rather_than_several, 100,
                [("opp5", PreemptReason.FOR_GUARANTEED)]),
    Preemptions("free-and-leaving-cover-the-need", _free_and_leaving_exactly_cover_the_need, 100, []),
    Preemptions("leaving-elsewhere-beats-a-fresh-victim", _leaving_elsewhere_beats_a_fresh_victim, 100, []),
    Preemptions("free-and-leaving-one-short", _free_and_leaving_one_short, 100,
                [("opp", PreemptReason.FOR_GUARANTEED)]),
    Preemptions("slice-ends-exactly-now", _lapsed_at_exactly_its_slice_end, HOUR,
                [("ends-now", PreemptReason.FAIR_SHARE)]),
    Preemptions("one-second-before-the-slice-end", _one_second_before_the_slice_end, HOUR - 1, []),
]  # fmt: skip


@pytest.mark.parametrize("case", PREEMPTIONS, ids=str)
def test_preemptions_at_the_edges(case: Preemptions) -> None:
    snap = case.world().snapshot()
    d = decide(snap, case.now)
    check_no_preemption_in_slice(snap, case.now, d)
    assert sorted((p.job_id, p.reason) for p in d.preempts) == sorted(case.victims)


def test_gpus_being_freed_are_ready_when_the_last_of_them_leaves() -> None:
    """Free and leaving GPUs cover the need: nobody is preempted, and the job's start is planned for when the last
    leaving job's notice ends."""
    w = one_node("red", "blue")
    w.running("leaving-early", "blue", {NODE: 1}, started=0, contract=OPP, leaving_until=130)
    w.running("leaving-late", "blue", {NODE: 1}, started=0, contract=OPP, leaving_until=400)
    w.running("in-slice", "blue", {NODE: 6}, started=0, slice_end=5 * HOUR)
    d = decide(w.pending("want", "red", gpus=2, submitted_at=0).snapshot(), 100)
    assert d.preempts == ()
    assert [(r.job_id, r.planned_start) for r in d.reserves] == [("want", 400)]


@dataclass(frozen=True)
class Funding:
    """A world, the instant to decide at, and the slices (job, slice end) the promises allow, with the blocker of
    every other pending job."""

    name: str
    world: Callable[[], World]
    now: int
    slices: dict[str, int]
    blocked: dict[str, Blocker]

    def __str__(self) -> str:
        return self.name


ONE_SLICE = credits(1)
"""A 1-GPU H100 slice of one hour at full price."""


def _balance(micro: int) -> Callable[[], World]:
    def world() -> World:
        w = one_node("red")
        w.accounts["red"] = Account(micro, 0.0)
        return w.pending("a", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)

    return world


def _one_and_a_half_credits_for_two_jobs() -> World:
    w = one_node("red", red=1.5)
    w.pending("a", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)
    return w.pending("b", "red", gpus=1, slice_seconds=HOUR, submitted_at=1)


def _two_credits_for_two_jobs() -> World:
    w = one_node("red", red=2)
    w.pending("a", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)
    return w.pending("b", "red", gpus=1, slice_seconds=HOUR, submitted_at=1)


def _rich_budget_served_first_then_an_empty_one() -> World:
    # rich has used nothing, poor a little: rich's job of the same shape is decided first
    w = World().cluster("c1", nodes=1).budget("rich").budget("poor", balance=0, usage=1.0)
    w.pending("rich-job", "rich", gpus=1, slice_seconds=HOUR, submitted_at=0)
    return w.pending("poor-job", "poor", gpus=1, slice_seconds=HOUR, submitted_at=0)


def _rich_budget_served_first_then_a_short_one() -> World:
    w = World().cluster("c1", nodes=1).budget("rich").budget("poor", balance=0.999999, usage=1.0)
    w.pending("rich-job", "rich", gpus=1, slice_seconds=HOUR, submitted_at=0)
    return w.pending("poor-job", "poor", gpus=1, slice_seconds=HOUR, submitted_at=0)


def _money_promised_to_a_running_slice() -> World:
    # 1.5 credits, half an hour of a 1-GPU slice still to run: 1 credit left, enough for one more slice
    w = one_node("red", red=1.5)
    w.running("r", "red", {NODE: 1}, started=0, slice_end=100 + 1800)
    return w.pending("a", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)


def _money_promised_to_a_running_slice_one_micro_short() -> World:
    w = one_node("red")
    w.accounts["red"] = Account(credits(1.5) - 1, 0.0)
    w.running("r", "red", {NODE: 1}, started=0, slice_end=100 + 1800)
    return w.pending("a", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)


def _shortened_to_a_window_start(balance: float, start: int) -> Callable[[], World]:
    """Another budget's window takes the whole pool from `start`; red asks for 4 hours."""

    def world() -> World:
        w = one_node("red", "win", red=balance).window("w1", "win", "c1", gpus=8, start=start, end=start + 10 * HOUR)
        return w.pending("a", "red", gpus=1, slice_seconds=4 * HOUR, submitted_at=0)

    return world


def _exactly_enough_but_no_room() -> World:
    # the node is held inside a slice: the job waits for GPUs, not for money
    w = one_node("red", "blue")
    w.accounts["red"] = Account(ONE_SLICE, 0.0)
    w.running("in-slice", "blue", {NODE: 8}, started=0, slice_end=5 * HOUR)
    return w.pending("a", "red", gpus=1, slice_seconds=HOUR, submitted_at=0)


def _a_session_and_a_batch_job_of_one_size() -> World:
    # a 10-minute session costs 1/6 credit; a batch job asking for 10 minutes gets min_slice (30 minutes), 1/2
    # credit: with 2/6 credit the session starts and the batch job cannot be funded
    w = one_node("red")
    w.accounts["red"] = Account(2 * ONE_SLICE // 6, 0.0)
    w.session("s", "red", gpus=1, length=600, submitted_at=0)
    return w.pending("a", "red", gpus=1, slice_seconds=600, submitted_at=1)


def _a_session_and_a_batch_slice_of_one_length() -> World:
    w = one_node("red")
    w.session("s", "red", gpus=1, length=1800, submitted_at=0)
    return w.pending("a", "red", gpus=1, slice_seconds=1800, submitted_at=1)


def _a_window_crowded_out_by_the_larger_job_only() -> World:
    # win's window holds 4 of the 8 GPUs from 2 h: a 6-GPU slice must end at its start (and red cannot pay even
    # for that: 12 credits), a 2-GPU slice fits beside it and runs its whole 4 hours (8 credits, all red has)
    w = one_node("red", "win", red=8).window("w1", "win", "c1", gpus=4, start=100 + 2 * HOUR, end=100 + 10 * HOUR)
    w.pending("big", "red", gpus=6, slice_seconds=4 * HOUR, submitted_at=0, priority=1)
    return w.pending("small", "red", gpus=2, slice_seconds=4 * HOUR, submitted_at=0)


FUNDING = [
    Funding("exactly-enough", _balance(ONE_SLICE), 100, {"a": 100 + HOUR}, {}),
    Funding("one-micro-short", _balance(ONE_SLICE - 1), 100, {}, {"a": Blocker.FUNDS}),
    Funding("exactly-enough-but-no-room", _exactly_enough_but_no_room, 100, {}, {"a": Blocker.CAPACITY}),
    Funding("a-session-and-a-batch-job-of-one-size", _a_session_and_a_batch_job_of_one_size, 100, {"s": 700},
            {"a": Blocker.FUNDS}),
    Funding("a-session-and-a-batch-slice-of-one-length", _a_session_and_a_batch_slice_of_one_length, 100,
            {"s": 1900, "a": 1900}, {}),
    Funding("window-crowded-out-by-the-larger-job-only", _a_window_crowded_out_by_the_larger_job_only, 100,
            {"small": 100 + 4 * HOUR}, {"big": Blocker.FUNDS}),
    Funding("one-and-a-half-credits-two-slices", _one_and_a_half_credits_for_two_jobs, 100, {"a": 100 + HOUR},
            {"b": Blocker.FUNDS}),
    Funding("two-credits-two-slices", _two_credits_for_two_jobs, 100, {"a": 100 + HOUR, "b": 100 + HOUR}, {}),
    Funding("empty-budget-after-a-rich-one", _rich_budget_served_first_then_an_empty_one, 100,
            {"rich-job": 100 + HOUR}, {"poor-job": Blocker.FUNDS}),
    Funding("short-budget-after-a-rich-one", _rich_budget_served_first_then_a_short_one, 100,
            {"rich-job": 100 + HOUR}, {"poor-job": Blocker.FUNDS}),
    Funding("money-promised-to-a-running-slice", _money_promised_to_a_running_slice, 100, {"a": 100 + HOUR}, {}),
    Funding("promised-money-one-micro-short", _money_promised_to_a_running_slice_one_micro_short, 100, {},
            {"a": Blocker.FUNDS}),
    Funding("shortened-to-window-priced-short", _shortened_to_a_window_start(2, 100 + 2 * HOUR), 100,
            {"a": 100 + 2 * HOUR}, {}),
    Funding("shortened-to-window-one-micro-short", _shortened_to_a_window_start(1.999999, 100 + 2 * HOUR), 100,
            {}, {"a": Blocker.FUNDS}),
    Funding("shortened-to-exactly-min-slice", _shortened_to_a_window_start(2, 100 + 1800), 100,
            {"a": 100 + 1800}, {}),
    Funding("shortened-below-min-slice", _shortened_to_a_window_start(2, 100 + 1799), 100, {},
            {"a": Blocker.WINDOW}),
]  # fmt: skip


@pytest.mark.parametrize("case", FUNDING, ids=str)
def test_slices_at_the_edges_of_the_money(case: Funding) -> None:
    snap = case.world().snapshot()
    d = decide(snap, case.now)
    assert {s.job_id: s.slice_end for s in d.starts} == case.slices
    jobs = {j.id: j for j in snap.jobs}
    assert all(
        s.run_class is (RunClass.SESSION if jobs[s.job_id].kind is JobKind.SESSION else RunClass.GUARANTEED)
        for s in d.starts
    )
    assert {jid: w.blocker for jid, w in d.pending.items()} == case.blocked


def _occupant(budget: str, slice_end: int | None, now: int = 1000) -> Occupant:
    run = Run((Allocation(NODE, (0,)),), 0, RunClass.GUARANTEED if slice_end else RunClass.OPPORTUNISTIC, slice_end)
    preemptible = slice_end is None or slice_end <= now
    return Occupant(Job("victim", budget, "u", 1, run=run), 1, now, preemptible, False, 0)


@pytest.mark.parametrize(
    ("victim_after", "preemptor_after", "taken"),
    [
        pytest.param(1.0, 0.5, True, id="victim-left-exactly-at-its-share"),
        pytest.param(0.999, 0.5, False, id="victim-left-just-below-its-share"),
        pytest.param(1.5, 1.499, True, id="preemptor-stays-just-below-the-victim"),
        pytest.param(1.5, 1.5, False, id="preemptor-would-equal-the-victim"),
    ],
)
def test_fair_share_preemption_at_exactly_the_share(victim_after: float, preemptor_after: float, taken: bool) -> None:
    """Slice-expired work goes only if its budget stays at or above its share and the preemptor stays strictly
    below it: at equality the victim is kept (strict progress, no loop of two budgets)."""
    occ = _occupant("blue", 1000)
    found = expired_yields_to_under_share(occ, 1000, "red", preemptor_after, lambda _: victim_after)
    assert found is (PreemptReason.FAIR_SHARE if taken else None)


@pytest.mark.parametrize(
    ("slice_end", "expired", "opportunistic"),
    [
        pytest.param(999, True, False, id="ended-a-second-ago"),
        pytest.param(1000, True, False, id="ends-exactly-now"),
        pytest.param(1001, False, False, id="ends-in-a-second"),
        pytest.param(None, False, True, id="no-slice"),
    ],
)
def test_a_slice_ending_exactly_now_is_expired(slice_end: int | None, expired: bool, opportunistic: bool) -> None:
    occ = _occupant("blue", slice_end)
    assert is_slice_expired(occ.job, 1000) is expired
    assert is_opportunistic_work(occ.job) is opportunistic
    assert victim_reason(occ, lambda o: session_takes(o, 1000)) is (
        PreemptReason.FOR_SESSION if expired or opportunistic else None
    )
    # the same budget's work is never taken for fair share, and an in-slice job by no rule at all
    assert expired_yields_to_under_share(occ, 1000, "blue", 0.0, lambda _: 9.0) is None
    assert (victim_reason(occ, reservation_claims) is None) is (not occ.preemptible)


def test_work_on_a_node_gone_from_the_fleet_ends_refunded() -> None:
    """Promise 1's exception: a node failure ends a slice early, refunded — also when the node has vanished from the
    fleet altogether (its GPUs are counted nowhere)."""
    w = one_node("red", "blue")
    w.running("on-gone", "blue", {"gone-node": 4}, started=0, slice_end=5 * HOUR)
    w.running("here", "blue", {NODE: 4}, started=0, slice_end=5 * HOUR)
    snap = w.pending("want", "red", gpus=4, submitted_at=0).snapshot()
    d = decide(snap, 100)
    check_no_preemption_in_slice(snap, 100, d)
    assert [(p.job_id, p.reason, p.refund) for p in d.preempts] == [("on-gone", PreemptReason.NODE_DOWN, True)]
    assert [(s.job_id, s.placement[0].node) for s in d.starts] == [("want", NODE)]


@pytest.mark.parametrize("free_nodes", [2, 3], ids=["exactly-two-free-nodes", "three-free-nodes"])
def test_a_gang_starts_on_exactly_as_many_free_nodes_as_it_needs(free_nodes: int) -> None:
    """Promises 5 and 7: a 2×8 gang with exactly two wholly free nodes is not left waiting."""
    w = World().cluster("c1", nodes=free_nodes + 1).budget("red").budget("blue")
    w.running("busy", "blue", {NODE: 1}, started=0, slice_end=5 * HOUR)
    d = decide(w.pending("gang", "red", gpus=8, replicas=2, submitted_at=0).snapshot(), 100)
    (start,) = d.starts
    assert start.job_id == "gang" and len(start.placement) == 2 and NODE not in {a.node for a in start.placement}
