"""The fleet map: an operator drains a node and sees when it will be empty; a researcher sees the map but gets no
drain action, and the API refuses one all the same."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.sdk.live import wait_for
from tests.web.conftest import Dashboard

GRACE = 60


def running(dashboard: Dashboard, user: str, job: str) -> dict[str, Any]:
    wait_for(lambda: dashboard.api(user, "GET", f"/jobs/{job}").json()["state"] == "running", f"{job} to run")
    detail: dict[str, Any] = dashboard.api(user, "GET", f"/jobs/{job}").json()
    return detail


def test_an_operator_drains_a_node_and_sees_its_estimated_empty_time(dashboard: Dashboard) -> None:
    job = dashboard.submit(
        "ben",
        "pretrain",
        command=["sleep", "600"],
        resources={"gpus": 8},
        contract={"class": "guaranteed", "slice": "30m"},
        grace=f"{GRACE}s",
    )
    run = running(dashboard, "ben", job)["runs"][-1]
    node = run["placement"][0]["node"]

    page = dashboard.login("fay", "/fleet")
    page.click(f".node[data-node='{node}']")
    expect(page.locator("#node-panel")).to_contain_text(job)
    page.fill("#node-why", "ECC errors")
    page.click("#drain")
    expect(page.locator("#flash")).to_contain_text(f"Draining {node}: empty by")
    tile = page.locator(f".node[data-node='{node}']")
    expect(tile).to_have_attribute("data-state", "draining")
    expect(tile.locator(".empty-by")).to_contain_text("empty in")
    empty_by = int(page.locator("#node-empty-by").get_attribute("data-empty-by") or "")
    assert empty_by == run["slice_end"] + GRACE  # contracted work leaves at its slice end, after its grace
    assert int(tile.locator(".empty-by").get_attribute("data-empty-by") or "") == empty_by
    expect(page.locator("#node-panel")).to_contain_text("ECC errors")

    assert dashboard.api("fay", "POST", f"/nodes/{node}/resume").status_code == 200
    dashboard.api("ben", "POST", f"/jobs/{job}/cancel")


def test_a_researcher_sees_the_fleet_but_cannot_drain_a_node(dashboard: Dashboard) -> None:
    page = dashboard.login("ben", "/fleet")
    tiles = page.locator(".node")
    expect(tiles).to_have_count(4)
    node = tiles.first.get_attribute("data-node")
    tiles.first.click()
    expect(page.locator("#no-actions")).to_be_visible()
    expect(page.locator("#drain")).to_have_count(0)
    status = page.evaluate(
        """async node => (await fetch(`/nodes/${node}/drain`, {
            method: "POST",
            headers: {
                Authorization: `Bearer ${localStorage.getItem("allot.token")}`,
                "Content-Type": "application/json",
            },
            body: JSON.stringify({why: "not mine to drain"}),
        })).status""",
        node,
    )
    assert status == 403
    assert dashboard.api("fay", "GET", f"/nodes/{node}").json()["state"] == "ready"
