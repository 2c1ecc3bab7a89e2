"""The dashboard's read endpoints over the real application and store (SQLite and PostgreSQL), driven by the engine
rig (simulated executor, manual clock): the queue pages through every pending job with its reason, the burn-down
series agrees with the ledger, the overview and fleet map count what runs, and reports never leave their folder."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest

from tests.api.conftest import Api, api, db  # noqa: F401  (the API tests' fixtures, reused)

HOUR = 3600


def get(api: Api, path: str, user: str = "eli") -> Any:  # noqa: F811
    response = api.call("GET", path, user)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_queue_pages_through_every_pending_job_oldest_first_with_its_reason(api: Api) -> None:  # noqa: F811
    jobs = [api.rig.submit(f"j-wide-{i}", "pretrain", "ben", gpus=8, replicas=4) for i in range(7)]
    for i, job in enumerate(jobs[:3]):  # distinct submission times, then three at the same second
        api.rig.clock.t += 1
        api.rig.submit(f"{job}-x", "finetune", "chen", gpus=8, replicas=8)
        jobs.insert(2 * i + 1, f"{job}-x")
    api.rig.step()
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = get(api, "/dashboard/queue?limit=3" + (f"&cursor={cursor}" if cursor else ""))
        assert page["total"] == 10 and len(page["items"]) <= 3
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len({j["id"] for j in seen}) == 10
    assert [(j["submitted_at"], j["id"]) for j in seen] == sorted((j["submitted_at"], j["id"]) for j in seen)
    for queued in seen:
        why = get(api, f"/jobs/{queued['id']}/why", "ada")
        assert (queued["blocker"], queued["message"], queued["estimated_start"]) == (
            why["blocker"],
            why["message"],
            why["estimated_start"],
        )
        assert queued["blocker"] is not None
    only = get(api, "/dashboard/queue?budget=finetune")
    assert only["total"] == 3 and {j["budget"] for j in only["items"]} == {"finetune"}
    assert api.call("GET", "/dashboard/queue?cursor=bogus", "eli").status_code == 400


def test_the_burn_down_follows_the_ledger_from_the_period_start_to_now(api: Api) -> None:  # noqa: F811
    api.rig.submit("j-a", "pretrain", "ben", gpus=8)
    api.rig.step()
    for _ in range(6):
        api.rig.step(api.rig.clock.t + HOUR)
    series = get(api, "/dashboard/budgets/pretrain/burndown?points=50")
    detail = get(api, "/budgets/pretrain")["budget"]
    points = series["points"]
    assert points[0]["at"] == series["period"]["start"]
    assert points[-1] == {"at": series["now"], "remaining_micro": detail["remaining_micro"]}
    assert points[0]["remaining_micro"] == series["funds_micro"] == detail["used_micro"] + detail["remaining_micro"]
    assert all(a["remaining_micro"] >= b["remaining_micro"] for a, b in itertools.pairwise(points))
    assert all(b["at"] - a["at"] <= series["bucket"] for a, b in itertools.pairwise(points))
    assert detail["used_micro"] > 0
    assert series["forecast"] == get(api, "/budgets/pretrain")["forecast"] and series["forecast"]["per_hour_micro"] > 0
    language = get(api, "/dashboard/budgets/language/burndown")
    assert language["points"][-1]["remaining_micro"] == get(api, "/budgets/language")["budget"]["remaining_micro"]


def test_the_overview_and_fleet_map_count_what_runs_and_what_waits(api: Api) -> None:  # noqa: F811
    api.rig.submit("j-run", "pretrain", "ben", gpus=8)
    api.rig.submit("j-run2", "finetune", "chen", gpus=8, grace=90)
    api.rig.submit("j-wait", "pretrain", "ben", gpus=8, replicas=4)
    api.rig.step()
    api.rig.step(api.rig.clock.t + HOUR)
    overview = get(api, "/dashboard/overview")
    assert overview["jobs_by_state"] == {"running": 2, "pending": 1}
    assert (overview["gpus"], overview["used_gpus"], overview["pending_gpus"]) == (32, 16, 32)
    assert {b["name"] for b in overview["fastest"]} == {"pretrain", "finetune"}
    [cluster] = get(api, "/dashboard/fleet")["clusters"]
    assert cluster["used_gpus"] == 16 and len(cluster["nodes"]) == 4
    busy = [n["name"] for n in cluster["nodes"] if n["used_gpus"]]
    assert len(busy) == 2
    drains = {  # an operator's drain waits for slice ends; an administrator's forced drain does not
        busy[0]: api.call("POST", f"/nodes/{busy[0]}/drain", "fay", {"why": "ECC"}).json(),
        busy[1]: api.call("POST", f"/nodes/{busy[1]}/drain", "ada", {"why": "dead", "force": True}).json(),
    }
    assert drains[busy[0]]["empty_by"] != drains[busy[1]]["empty_by"]
    for node in get(api, "/dashboard/fleet")["clusters"][0]["nodes"]:
        if node["name"] in drains:
            assert (node["state"], node["empty_by"]) == ("draining", drains[node["name"]]["empty_by"])
        else:
            assert (node["state"], node["empty_by"]) == ("ready", None)
    assert get(api, "/dashboard/overview")["unavailable_gpus"] == 16


def test_charges_page_through_a_budgets_subtree_newest_first(api: Api) -> None:  # noqa: F811
    api.rig.submit("j-a", "pretrain", "ben", gpus=8)
    api.rig.step()
    for _ in range(4):
        api.rig.step(api.rig.clock.t + HOUR)
    pages, cursor = [], None
    while True:
        page = get(api, "/dashboard/budgets/language/charges?limit=2" + (f"&cursor={cursor}" if cursor else ""), "ben")
        pages += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    ids = [c["id"] for c in pages]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)
    assert {c["budget"] for c in pages} == {"pretrain", "finetune"}  # allocations of both leaves, charges of one
    assert any(c["kind"] == "charge" and c["job_id"] == "j-a" for c in pages)


@pytest.mark.parametrize(
    "path",
    [
        "/reports/simulations/../secret/report.html",
        "/reports/simulations/%2E%2E/secret/report.html",
        "/reports/simulations/run/notes.txt",
        "/reports/simulations/run/.hidden.png",
        "/reports/simulations/outside/report.html",
        "/reports/simulations/missing/report.md",
    ],
)
def test_report_files_never_leave_the_reports_folder(api: Api, path: str) -> None:  # noqa: F811
    reports = api.ctx.data_dir / "reports"
    (reports / "run").mkdir(parents=True)
    (reports / "run" / "notes.txt").write_text("not a report")
    (reports / "run" / ".hidden.png").write_bytes(b"\x89PNG")
    secret = api.ctx.data_dir / "secret"
    secret.mkdir()
    (secret / "report.html").write_text("<p>outside</p>")
    (reports / "outside").symlink_to(secret)
    assert api.call("GET", path, "eli").status_code == 404


def test_reports_are_listed_newest_first_and_served_as_stored(api: Api) -> None:  # noqa: F811
    reports = api.ctx.data_dir / "reports"
    for name, at in (("old", 1_000), ("new/nested", 2_000)):
        (reports / name).mkdir(parents=True)
        (reports / name / "report.md").write_text(f"# {name}\n")
        os.utime(reports / name / "report.md", (at, at))
    listed = get(api, "/reports/simulations")
    assert [(r["name"], r["files"]) for r in listed] == [("new/nested", ["report.md"]), ("old", ["report.md"])]
    response = api.call("GET", "/reports/simulations/new/nested/report.md", "eli")
    assert response.text == "# new/nested\n"
    assert response.headers["content-type"].startswith("text/markdown")
    (reports / "old" / "busy.png").write_bytes(b"\x89PNG plot")
    plot = api.call("GET", "/reports/simulations/old/busy.png", "eli")
    assert (plot.content, plot.headers["content-type"]) == (b"\x89PNG plot", "image/png")
