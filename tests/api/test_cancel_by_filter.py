"""Cancelling by filter (POST /jobs/cancel, scancel -u/-A/-t/-n): exactly the matching active jobs are asked to
cancel, a non-administrator only ever reaches their own, a dry run changes nothing, and the engine then ends them
(pending ones at once, running ones after their grace) like a one-job cancellation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.api.conftest import Api


@dataclass
class World:
    """A queue of named jobs: (user, budget, name) → job id, with one of ben's running."""

    api: Api
    ids: dict[str, str] = field(default_factory=dict)

    def job(self, key: str, user: str, budget: str, name: str, gpus: int = 8) -> World:
        self.ids[key] = self.api.submit(user, budget, name=name, resources={"gpus": gpus})
        return self

    def cancel(self, caller: str, /, **where: Any) -> Any:
        return self.api.call("POST", "/jobs/cancel", caller, where)

    def asked(self) -> set[str]:
        return {
            k
            for k, job in self.ids.items()
            if self.api.call("GET", f"/jobs/{job}", "ada").json()["cancel_requested_at"]
        }

    def state(self, key: str) -> str:
        return str(self.api.call("GET", f"/jobs/{self.ids[key]}", "ada").json()["state"])


def world(api: Api) -> World:
    w = World(api).job("ben-run", "ben", "pretrain", "sweep", gpus=8)
    api.rig.step()  # ben-run starts; the rest stay pending behind the pretrain limit or the fleet
    return (
        w.job("ben-sweep", "ben", "pretrain", "sweep", gpus=8)
        .job("ben-eval", "ben", "pretrain", "eval", gpus=8)
        .job("chen-sweep", "chen", "pretrain", "sweep", gpus=8)
        .job("chen-ft", "chen", "finetune", "sweep", gpus=8)
    )


CASES = [
    pytest.param("ben", {"user": "ben"}, {"ben-run", "ben-sweep", "ben-eval"}, id="owner-by-user"),
    pytest.param("ben", {"budget": "pretrain"}, {"ben-run", "ben-sweep", "ben-eval"}, id="member-by-budget-only-own"),
    pytest.param("ben", {"name": "sweep"}, {"ben-run", "ben-sweep"}, id="member-by-name-only-own"),
    pytest.param("ben", {"states": ["pending"]}, {"ben-sweep", "ben-eval"}, id="pending-only-leaves-running"),
    pytest.param("ben", {"states": ["running"], "name": "sweep"}, {"ben-run"}, id="every-filter-must-match"),
    pytest.param("ada", {"budget": "pretrain"}, {"ben-run", "ben-sweep", "ben-eval", "chen-sweep"}, id="admin-budget"),
    pytest.param("ada", {"name": "sweep", "user": "chen"}, {"chen-sweep", "chen-ft"}, id="admin-user-and-name"),
    pytest.param("chen", {"budget": "vision"}, set(), id="nothing-matches"),
]


@pytest.mark.parametrize(("caller", "where", "expected"), CASES)
def test_exactly_the_matching_active_jobs_are_asked_to_cancel(
    api: Api, caller: str, where: dict[str, Any], expected: set[str]
) -> None:
    w = world(api)
    api.wake.clear()
    response = w.cancel(caller, **where)
    assert response.status_code == 200, response.text
    report = response.json()
    assert {j["id"] for j in report["jobs"]} == {w.ids[k] for k in expected}
    assert report["matched"] == report["requested"] == len(expected) and report["dry_run"] is False
    assert w.asked() == expected
    assert api.wake.is_set() == bool(expected)
    again = w.cancel(caller, **where).json()  # asking twice is harmless and says nothing new was asked
    assert again["matched"] == len(expected) and again["requested"] == 0


REFUSED = [
    pytest.param("ben", {}, 422, "at least one", id="no-filter"),
    pytest.param("ada", {"states": ["completed"]}, 422, "not an active state", id="final-state"),
    pytest.param("ben", {"user": "chen"}, 403, "administrators only", id="another-users-jobs"),
    pytest.param("ben", {"budget": "pretrain", "bogus": 1}, 422, "bogus", id="unknown-field"),
]


@pytest.mark.parametrize(("caller", "where", "status", "says"), REFUSED)
def test_a_refused_filter_cancels_nothing(api: Api, caller: str, where: dict[str, Any], status: int, says: str) -> None:
    w = world(api)
    response = w.cancel(caller, **where)
    assert response.status_code == status and says in response.text
    assert w.asked() == set()


def test_a_dry_run_reports_and_changes_nothing(api: Api) -> None:
    w = world(api)
    report = w.cancel("ada", name="sweep", dry_run=True).json()
    assert {j["id"] for j in report["jobs"]} == {w.ids[k] for k in ("ben-run", "ben-sweep", "chen-sweep", "chen-ft")}
    assert report["matched"] == 4 and report["requested"] == 0 and report["dry_run"] is True
    assert w.asked() == set()


def test_the_engine_ends_what_was_asked_pending_at_once_running_after_its_grace(api: Api) -> None:
    w = world(api)
    w.cancel("ben", user="ben")
    api.rig.step(api.rig.clock.now() + 1)
    assert (w.state("ben-sweep"), w.state("ben-eval")) == ("cancelled", "cancelled")
    assert w.state("ben-run") == "preempting" and w.state("chen-sweep") in ("pending", "running")
    api.rig.step(api.rig.clock.now() + 400)  # past the grace: the simulated run exits
    api.rig.step(api.rig.clock.now() + 1)
    assert w.state("ben-run") == "cancelled"
    assert w.state("chen-ft") != "cancelled"
