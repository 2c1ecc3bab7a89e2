"""Rule `gang-backfill` (decision 68): after both passes of fair-share order, a gang still waiting for capacity may
start on whole nodes a plan claims, where it cannot delay the plan (its slice capped to end by the planned start),
and only the unclaimed nodes it takes count against the session room. Opportunistic work is placed there first."""

from __future__ import annotations

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Decisions
from allotment.core.model import ContractClass, Reservation, ReservationKind
from tests.core.builders import HOUR, World
from tests.core.strategies import CheckedDriver

decide = AllotmentPolicy().decide
NOW = 10 * HOUR
PLAN_AT = NOW + 3 * HOUR


def _planned_world(plan_at: int = PLAN_AT) -> World:
    """Four 8-GPU nodes. Budget big's job P has a plan for three of them at `plan_at`: nodes 00 and 01 are idle,
    node 02 is held by a slice that ends a grace before. Node 03 is free: the cluster's session room. One plan at
    most, so the gang of budget other that waits has none of its own."""
    w = World().cluster("c1", nodes=4).budget("org", alloc=3000).budget("big", "org").budget("other", "org")
    w.policy(max_reservations=1).room("c1", 8)
    w.running("held", "big", {"c1-h100-02": 8}, started=NOW - HOUR, slice_end=plan_at - 60, grace=60)
    w.pending("P", "big", gpus=8, replicas=3, submitted_at=NOW - HOUR, slice_seconds=2 * HOUR)
    nodes = (("c1-h100-00", 8), ("c1-h100-01", 8), ("c1-h100-02", 8))
    w.reserve(Reservation("P", nodes, plan_at, ReservationKind.PLANNED, NOW - HOUR, ("held",)))
    return w


def _starts(d: Decisions) -> dict[str, tuple[tuple[str, ...], int | None]]:
    return {s.job_id: (tuple(a.node for a in s.placement), s.slice_end) for s in d.starts}


@pytest.mark.parametrize(
    ("plan_in", "starts"),
    [
        pytest.param(3 * HOUR, True, id="plan-hours-away-the-gang-runs-until-it"),
        pytest.param(20 * 60, False, id="plan-closer-than-a-minimum-slice-the-nodes-wait-for-it"),
    ],
)
def test_a_waiting_gang_backfills_the_idle_claimed_nodes_with_its_slice_capped(plan_in: int, starts: bool) -> None:
    w = _planned_world(NOW + plan_in)
    w.pending("G", "other", gpus=8, replicas=2, submitted_at=NOW - 60, slice_seconds=4 * HOUR, grace=60)
    d = CheckedDriver(w.snapshot(), {}, NOW).step(NOW)
    got = _starts(d)
    if starts:
        assert got == {"G": (("c1-h100-00", "c1-h100-01"), NOW + plan_in - 60)}  # ends a grace before the plan
    else:
        assert "G" not in got
    assert [r.planned_start for r in d.reserves if r.job_id == "P"] == [NOW + plan_in]


def test_the_gang_takes_no_unclaimed_node_the_room_needs() -> None:
    """Node 03 is the room: a 3-node gang would need it beside the two claimed nodes, and waits."""
    w = _planned_world()
    w.pending("G", "other", gpus=8, replicas=3, submitted_at=NOW - 60, slice_seconds=HOUR, grace=60)
    assert "G" not in _starts(decide(w.snapshot(), NOW))


def test_opportunistic_work_is_placed_on_the_claimed_nodes_before_the_gang() -> None:
    """A one-node opportunistic job waiting beside the gang takes a claimed node first (it leaves in seconds when
    the plan is due); the gang then no longer fits there and waits."""
    w = _planned_world()
    w.pending("G", "other", gpus=8, replicas=2, submitted_at=NOW - 60, slice_seconds=HOUR, grace=60)
    w.pending("sweep", "other", gpus=8, submitted_at=NOW - 60, contract=ContractClass.OPPORTUNISTIC, grace=30)
    got = _starts(decide(w.snapshot(), NOW))
    assert set(got) == {"sweep"}
    assert got["sweep"][0][0] in {"c1-h100-00", "c1-h100-01"}
