"""A planned start is a promise (promise 8): kept when the fair-share standings move, leaving the session headroom
to sessions, not undone by backfill on GPUs being freed by preemption, and not made late by a cycle that comes
after the instant a victim had to be told to leave."""

from __future__ import annotations

from dataclasses import replace

from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import ContractClass, Reservation, ReservationKind
from tests.core.builders import HOUR, World
from tests.core.driver import Driver

decide = AllotmentPolicy().decide


def test_a_plan_keeps_counting_on_work_that_gave_way_when_it_was_made() -> None:
    """ "big" is the heavier budget when the gang's plan is made, so its slice on the node gives way to the plan. When
    the standings move (big's usage decays, the gang's grows), the plan still counts on it: big's slice is not
    renewed past the planned start and the gang starts then."""
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000)
    w.budget("big", "org", usage=5000.0).budget("gang", "org")
    w.running("r0", "big", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.pending("g", "gang", gpus=8)
    drv = Driver(w.snapshot(), durations={"r0": 10 * HOUR, "g": HOUR})
    (plan,) = drv.step(60).reserves
    assert (plan.planned_start, plan.gave_way) == (HOUR + 60, ("r0",))
    drv.accounts["big"] = replace(drv.accounts["big"], usage=0.0)
    drv.accounts["gang"] = replace(drv.accounts["gang"], usage=50000.0)
    d = drv.step(120)
    assert [(r.job_id, r.planned_start, r.gave_way) for r in d.reserves] == [("g", HOUR + 60, ("r0",))]
    drv.run_until(HOUR + 120, every=300)
    assert "r0" not in [e.job for e in drv.events("renew")]
    assert drv.started_at("g") == HOUR + 60


def test_without_the_memory_the_moved_standings_keep_the_slice() -> None:
    """The same world with no plan yet: once the standings have moved, big's slice no longer gives way (it would be
    renewed), so what the plan remembers is what keeps the promise above."""
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000)
    w.budget("big", "org", usage=0.0).budget("gang", "org", usage=50000.0)
    w.running("r0", "big", {"c1-h100-00": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.pending("g", "gang", gpus=8)
    d = decide(w.snapshot(), 120)
    assert not d.reserves


def _full_cluster(nodes: int) -> World:
    """A cluster of `nodes` 8-GPU nodes with 8 GPUs of session headroom, each node held by a heavy budget's slice
    that ends in an hour, and three light budgets each waiting with one whole-node job."""
    w = World().cluster("c1", nodes=nodes).budget("org", alloc=4000).policy(default_headroom=8)
    w.budget("big", "org", usage=5000.0)
    for i in range(nodes):
        w.running(f"r{i}", "big", {f"c1-h100-{i:02d}": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    for name in ("alpha", "bravo", "charlie"):
        w.budget(name, "org").pending(f"g-{name}", name, gpus=8)
    return w


def test_plans_leave_the_session_headroom_unclaimed() -> None:
    """Sessions and the headroom refill work only on nodes no plan claims: with three nodes and 8 GPUs of headroom,
    two plans claim two nodes and the third job waits without one, its reason saying so."""
    d = decide(_full_cluster(3).snapshot(), 60)
    assert sorted(r.job_id for r in d.reserves) == ["g-alpha", "g-bravo"]
    claimed = {n for r in d.reserves for n, _ in r.nodes}
    assert len(claimed) == 2
    why = d.pending["g-charlie"]
    assert why.estimated_start is not None  # it still learns when GPUs could be free
    assert "leave only the session headroom unclaimed" in why.message


def test_the_first_plan_in_a_cluster_may_claim_its_headroom() -> None:
    """A gang as large as the whole cluster still gets a planned start (otherwise it never could): the rule leaves
    room only beside other plans."""
    w = World().cluster("c1", nodes=2).budget("org", alloc=4000).policy(default_headroom=8)
    w.budget("big", "org", usage=5000.0).budget("gang", "org")
    for i in range(2):
        w.running(f"r{i}", "big", {f"c1-h100-{i:02d}": 8}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.pending("g", "gang", gpus=8, replicas=2)
    (plan,) = decide(w.snapshot(), 60).reserves
    assert plan.kind is ReservationKind.PLANNED and len(plan.nodes) == 2


def test_backfill_cannot_take_the_room_of_gpus_being_freed_by_preemption() -> None:
    """A 6-GPU job frees its GPUs by preempting a 5-GPU opportunistic job (10 minutes of notice) beside one free GPU;
        the rest of the node stays (another budget's slice, ending before then but renewed, and the job's own budget's
    opportunistic work, not needed). A 1-GPU job of a heavier
        budget, served after it in the same cycle, must not take the free GPU for a slice past the preemption's ready
        time: the next cycle would then find the 6 GPUs ready only when that slice ends."""
    w = World().cluster("c1", nodes=1).budget("org", alloc=4000)
    w.budget("heavy", "org", usage=5000.0).budget("mine", "org").budget("other", "org", usage=10.0)
    w.budget("small", "org", usage=3000.0)
    w.running("opp", "heavy", {"c1-h100-00": 5}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=600)
    w.running("s1", "other", {"c1-h100-00": 1}, started=0, slice_end=300, slice_seconds=HOUR, grace=0)
    w.running("own", "mine", {"c1-h100-00": 1}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=0)
    w.pending("six", "mine", gpus=6).pending("one", "small", gpus=1, slice_seconds=8 * HOUR)
    drv = Driver(w.snapshot(), durations={"opp": 10 * HOUR, "s1": 10 * HOUR, "own": 10 * HOUR, "six": HOUR})
    d = drv.step(60)
    assert [(r.job_id, r.kind, r.planned_start) for r in d.reserves] == [("six", ReservationKind.PREEMPTION, 660)]
    assert [p.job_id for p in d.preempts] == ["opp"] and not d.starts
    d = drv.step(360)
    assert [(r.job_id, r.planned_start) for r in d.reserves if r.job_id == "six"] == [("six", 660)]
    drv.run_until(720, every=300)
    assert drv.started_at("six") == 660


def test_a_plan_asks_to_decide_again_when_a_victim_must_be_told_to_leave() -> None:
    """The gang's node frees when big's slice ends (1 h + 60 s of grace); the sweep beside it has 10 minutes of
    notice, so it must be told at 1 h − 9 min. decide() says when (wake_at), and a caller deciding only every 20
    minutes otherwise still starts the gang on time by deciding then."""
    w = World().cluster("c1", nodes=1).budget("org", alloc=2000)
    w.budget("big", "org", usage=5000.0).budget("gang", "org").budget("sweeps", "org")
    w.running("r0", "big", {"c1-h100-00": 4}, started=0, slice_end=HOUR, slice_seconds=HOUR)
    w.running("sweep", "sweeps", {"c1-h100-00": 4}, started=0, contract=ContractClass.OPPORTUNISTIC, grace=600)
    w.pending("g", "gang", gpus=8)
    drv = Driver(w.snapshot(), durations={"r0": 10 * HOUR, "sweep": 10 * HOUR, "g": HOUR})
    d = drv.step(60)
    assert [(r.job_id, r.planned_start) for r in d.reserves] == [("g", HOUR + 60)] and not d.preempts
    assert d.wake_at == HOUR + 60 - 600
    drv.run_until(HOUR + 600, every=1200)
    assert ("sweep", HOUR + 60 - 600) in [(e.job, e.at) for e in drv.events("preempt")]
    assert drv.started_at("g") == HOUR + 60


def test_two_carried_plans_of_one_budget_pass_to_its_first_job_once() -> None:
    """A budget keeps one planned start, for its first job. Two plans carried for two of its later jobs (a snapshot
    from before a change of limits, or a reorder) pass to the first job once: the earlier plan is kept for it, the
    other is dropped — handed both, it would start twice in one cycle, once on each plan's GPUs."""
    w = World().cluster("c1", nodes=2).budget("alpha").budget("beta")
    w.running("x", "beta", {"c1-h100-00": 8}, started=0, slice_end=30, leaving_until=HOUR)
    w.pending("head", "alpha", gpus=1, priority=5, submitted_at=0)
    w.pending("a", "alpha", gpus=1, submitted_at=0).pending("b", "alpha", gpus=1, submitted_at=0)
    w.reserve(Reservation("a", (("c1-h100-00", 1),), HOUR, ReservationKind.PLANNED))
    w.reserve(Reservation("b", (("c1-h100-01", 1),), 120, ReservationKind.PLANNED))
    d = decide(w.snapshot(), 60)
    started = [s.job_id for s in d.starts]
    assert started.count("head") == 1 and len(started) == len(set(started))
