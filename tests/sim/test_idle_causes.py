"""Why GPUs idle while demand exceeds supply (sim.observe.IdleWatch, metrics.idle_when_contended; docs/simulation.md
"Metrics"): each idle GPU gets one cause, and the causes and utilisation while contended add up to the whole fleet."""

from __future__ import annotations

import pytest

from allotment.core.decisions import Decisions, Reserve, Start
from allotment.core.model import Allocation, NodeState, ReservationKind, RunClass
from allotment.sim import metrics
from allotment.sim.observe import IDLE_CAUSES, idle_by_cause
from tests.core.builders import World, two_team_world
from tests.sim.builders import sim_job
from tests.sim.test_simulation import simulate

H = 3600
KEYS = [key for key, _ in IDLE_CAUSES]


NOTHING = Decisions()


def causes(world: World, decisions: Decisions = NOTHING, keeps_room: bool = True) -> dict[str, int]:
    return dict(zip(KEYS, idle_by_cause(world.snapshot(), decisions, keeps_room), strict=True))


def only(**kw: int) -> dict[str, int]:
    return {key: kw.get(key, 0) for key in KEYS}


# two_team_world: one cluster c1 of four 8-GPU H100 nodes, c1-h100-00 … c1-h100-03
N0, N1, N2 = "c1-h100-00", "c1-h100-01", "c1-h100-02"


@pytest.mark.parametrize(
    ("name", "world", "expected"),
    [
        ("a full fleet idles nothing",
         two_team_world().running("a", "red", {N0: 8, N1: 8, N2: 8, "c1-h100-03": 8}), only()),
        ("free GPUs up to the room are the room's",
         two_team_world().room("c1", 8).running("a", "red", {N0: 8, N1: 8}).pending("w", "red", gpus=32),
         only(room=8, too_big=8)),
        ("beyond the room, a waiting job that would fit their number is held back",
         two_team_world().room("c1", 8).running("a", "red", {N0: 8, N1: 8}).pending("w", "blue", gpus=4),
         only(room=8, held=8)),
        ("with nothing waiting, every free GPU beyond the room is one no waiting job needs",
         two_team_world().room("c1", 4).running("a", "red", {N0: 8, N1: 8, N2: 8}), only(room=4, too_big=4)),
        ("a drained node's idle GPUs come first",
         two_team_world().room("c1", 8).node_state(N0, NodeState.DRAINING).running("a", "red", {N1: 8, N2: 8}),
         only(unavailable=8, room=8)),
    ],
)  # fmt: skip
def test_each_idle_gpu_has_one_cause(name: str, world: World, expected: dict[str, int]) -> None:
    assert causes(world) == expected, name


def test_a_policy_that_keeps_no_room_has_none() -> None:
    world = two_team_world().room("c1", 8).running("a", "red", {N0: 8, N1: 8}).pending("w", "blue", gpus=4)
    assert causes(world, keeps_room=False) == only(held=16)


def test_a_reservations_nodes_are_claimed_and_a_start_holds_its_gpus() -> None:
    world = two_team_world().room("c1", 8).running("a", "red", {N0: 4}).pending("w", "blue", gpus=16)
    world.pending("s", "red", gpus=8)
    decisions = Decisions(
        starts=(Start("s", (Allocation(N1, tuple(range(8))),), RunClass.GUARANTEED, 2 * H, "fair-share"),),
        reserves=(Reserve("w", ((N0, 8), (N2, 8)), 3 * H, ReservationKind.PLANNED, 0),),
    )
    # N0's four free GPUs and N2's eight are the plan's; N1 is full; N3's eight are the room
    assert causes(world, decisions) == only(claimed=12, room=8)


def test_causes_count_only_while_demand_exceeds_supply() -> None:
    # 8 GPUs: contended for the first two hours (offered 16), then not (offered 4)
    points = [(0, 6, 16), (2 * H, 4, 4)]
    samples = [(0, (0, 0, 2, 0, 0)), (H, (0, 1, 0, 1, 0)), (2 * H, (0, 0, 4, 0, 0))]
    got = metrics.idle_when_contended(points, samples, 8, 3 * H)
    assert got == pytest.approx(dict(zip(KEYS, [0, 1 / 16, 2 / 16, 1 / 16, 0], strict=True)))


def test_a_simulations_idle_causes_and_utilisation_make_up_the_fleet() -> None:
    budgets = ("pretrain", "finetune", "detection", "segmentation")
    jobs = [sim_job(f"j{i}", i * 60, budget=budgets[i % 4], user=f"u{i}", gpus=8 if i % 3 else 4) for i in range(24)]
    m = metrics.compute(simulate(jobs, horizon=8 * H))
    assert m.contended_hours > 0
    assert set(m.idle_contended) == set(KEYS)
    assert m.utilisation_contended + sum(m.idle_contended.values()) == pytest.approx(1.0, abs=0.01)
