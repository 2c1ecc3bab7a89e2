"""The session room as users and operators see it (rule `adaptive-room`, decision 54): the room the engine's last
cycle sized for each cluster — its GPUs, how many on one node, and where the size came from — in `/metrics`, the
dashboard's fleet map and `allot why` for a session, read over a real store after real engine cycles."""

from __future__ import annotations

from tests.api.conftest import Api
from tests.ops.test_metrics import scrape, value

ROOM = {"cluster": "lab", "gpus": 9, "whole": 8, "floor": 0, "demand": 9, "shape": 8, "ceiling": 32}
"""The small example's lab (the test rig's policy keeps no floor) after an 8-GPU and a 1-GPU session held their GPUs
for a minute: the demand (9 concurrent session GPUs), with a whole node kept for the next 8-GPU session."""


def _session(api: Api, gpus: int) -> str:
    response = api.call("POST", "/sessions", "eli", {"budget": "detection", "gpus": gpus, "length": 3600})
    assert response.status_code in (200, 201), response.text
    return str(response.json()["job"]["id"])


def test_the_room_sized_from_session_demand_shows_in_metrics_the_fleet_map_and_why(api: Api) -> None:
    _session(api, 8)
    _session(api, 1)
    t = api.rig.clock.now()
    api.rig.step()
    over = _session(api, 2)  # eli's third: waits on the per-user session limit
    api.rig.step(t + 60)

    samples = scrape(api.client)
    assert value(samples, "allotment_session_room_gpus", cluster="lab") == ROOM["gpus"]
    assert value(samples, "allotment_session_room_whole_gpus", cluster="lab") == ROOM["whole"]

    fleet = api.call("GET", "/dashboard/fleet", "dana").json()
    assert [c["room"] for c in fleet["clusters"]] == [ROOM]

    why = api.call("GET", f"/jobs/{over}/why", "eli").json()
    assert why["rooms"] == [ROOM]


def test_before_the_first_cycle_no_room_is_shown(api: Api) -> None:
    fleet = api.call("GET", "/dashboard/fleet", "dana").json()
    assert [c["room"] for c in fleet["clusters"]] == [None]
    assert value(scrape(api.client), "allotment_session_room_gpus", cluster="lab") == 0
