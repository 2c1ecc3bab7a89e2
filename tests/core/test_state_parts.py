"""The cycle's state in parts (decision 45): indices over the snapshot, and an outcome whose tallies move together.

A start, a preemption reservation and a renewal each go through the Outcome's named methods; these tests pin that
`started`, `held` (for every budget up the tree), `committed` and the session count agree with the decisions after
a whole cycle, and that CycleState.start moves capacity, fair share and the outcome at once.
"""

from __future__ import annotations

from allotment.core.cycle import run_steps
from allotment.core.decisions import Blocker, PreemptReason
from allotment.core.model import FULL_PRICE, JobKind, ReservationKind, RunClass
from allotment.core.placement import Placement
from allotment.core.state import CycleState
from allotment.core.units import cost
from tests.core.builders import HOUR, two_team_world


def test_a_start_moves_started_held_committed_and_sessions_together() -> None:
    world = two_team_world().session("s1", "red", gpus=2, length=HOUR).pending("b1", "blue", gpus=4)
    st = CycleState(world.snapshot(), now=0)
    ix, out = st.ix, st.out
    session, batch = ix.jobs["s1"], ix.jobs["b1"]
    pool = ("c1", "H100")
    free_before = st.cap.free_in_pools((pool,))
    standing_before = st.fs.standing("red")

    st.start(session, Placement(pool, ((0, 2),)), RunClass.SESSION, HOUR, "session")
    st.start(batch, Placement(pool, ((1, 4),)), RunClass.OPPORTUNISTIC, None, "fair-share")

    assert out.started == {"s1", "b1"}
    assert [s.job_id for s in out.starts] == ["s1", "b1"]
    assert out.held == {"org": 6, "red": 2, "blue": 4}
    # only the slice is promised money; opportunistic work has none
    assert out.committed == {"red": cost(2, ix.rate(pool), ix.pol.session_price, HOUR)}
    assert out.sessions_of == {session.user: 1}
    assert out.started_terms["s1"] == (HOUR, 2, ix.rate(pool))
    assert st.cap.free_in_pools((pool,)) == free_before - 6
    assert [o.gpus for o in st.cap.occupants_of["b1"]] == [4]
    assert st.fs.standing("red") > standing_before
    assert not out.is_open("s1")
    st.release()


def test_the_indices_index_the_snapshot_and_the_outcome_starts_from_the_running_work() -> None:
    world = (
        two_team_world()
        .running("r1", "red", on={"c1-h100-00": 4}, started=0, slice_end=2 * HOUR)
        .pending("p1", "blue", gpus=2)
    )
    st = CycleState(world.snapshot(), now=HOUR)
    assert set(st.ix.jobs) == {"r1", "p1"}
    assert st.ix.leaves == {"red", "blue"}
    assert [j.id for j in st.ix.queues["blue"]] == ["p1"]
    assert st.out.held == {"org": 4, "red": 4}
    assert st.out.committed == {"red": cost(4, st.ix.rate(("c1", "H100")), FULL_PRICE, HOUR)}
    assert st.out.starts == [] and st.out.started == set()
    st.release()


def test_outcome_marks() -> None:
    st = CycleState(two_team_world().pending("p1", "red").snapshot(), now=0)
    out = st.out
    out.block("p1", Blocker.FUNDS)
    assert not out.is_open("p1")
    out.pass_over("p2")
    assert out.blockers["p2"] is Blocker.CAPACITY and "p2" in out.unchecked
    out.wake_by(50)
    out.wake_by(80)
    out.wake_by(20)
    assert out.wake_at == 20
    job = st.ix.jobs["p1"]
    st.preempt(job, PreemptReason.HEADROOM, None)
    st.preempt(job, PreemptReason.DRAIN, None)  # once per cycle: the first reason stands
    assert [(p.job_id, p.reason) for p in out.preempts] == [("p1", PreemptReason.HEADROOM)]
    st.release()


def test_after_the_steps_held_and_sessions_agree_with_the_decisions() -> None:
    world = (
        two_team_world(nodes=3)
        .running("r1", "red", on={"c1-h100-00": 8}, started=0, slice_end=HOUR)
        .running("o1", "blue", on={"c1-h100-01": 8}, started=0)
        .pending("p1", "red", gpus=8)
        .pending("p2", "blue", gpus=4)
        .pending("p3", "blue", gpus=8)
        .session("s1", "red", gpus=1)
    )
    snapshot, now = world.snapshot(), HOUR
    st = CycleState(snapshot, now)
    ix, out = st.ix, st.out
    run_steps(st)

    assert out.starts, "the free node takes work"
    gpus_of = {j.id: j.run.gpu_count for j in snapshot.jobs if j.run is not None}
    gpus_of.update({s.job_id: sum(len(a.gpus) for a in s.placement) for s in out.starts})
    for r in out.reserves:
        if r.kind is ReservationKind.PREEMPTION:
            gpus_of[r.job_id] = sum(g for _, g in r.nodes)
    for budget in ("org", "red", "blue"):
        expected = sum(g for jid, g in gpus_of.items() if budget in st.fs.ancestors(ix.jobs[jid].budget))
        assert out.held.get(budget, 0) == expected, budget
    assert out.started == {s.job_id for s in out.starts}
    sessions = [s for s in out.starts if ix.jobs[s.job_id].kind is JobKind.SESSION]
    assert sum(out.sessions_of.values()) == len(sessions)
    st.release()
