"""Job dependencies (sbatch --dependency: afterok, afterany, afternotok, after, singleton) through the API, over
several engine cycles: a dependent job waits with its dependency as the reason however free the fleet is, starts in
the cycle that hears the job it waits for end, is cancelled with the reason when its dependency can never be
satisfied (a chain in one cycle), and a submission naming a job that does not exist, or one its user may not see,
is refused (422)."""

from __future__ import annotations

from typing import Any

import pytest

from allotment.executors.simulated import Outcome
from tests.api.conftest import Api


def submitted(api: Api, user: str, budget: str = "pretrain", *, outcome: Outcome | None = None, **spec: Any) -> str:
    job = api.submit(user, budget, resources={"gpus": 8}, **spec)
    api.rig.outcomes[job] = outcome or Outcome(duration=None)
    return job


def job(api: Api, job_id: str) -> dict[str, Any]:
    body: dict[str, Any] = api.call("GET", f"/jobs/{job_id}", "ada").json()
    return body


def state(api: Api, job_id: str) -> str:
    return str(job(api, job_id)["state"])


def why(api: Api, job_id: str) -> dict[str, Any]:
    body: dict[str, Any] = api.call("GET", f"/jobs/{job_id}/why", "ada").json()
    return body


def tick(api: Api, seconds: int) -> None:
    api.rig.step(api.rig.clock.now() + seconds)


def later(api: Api) -> None:
    """A second on: jobs submitted in one second are ordered by id, so a test that needs an order waits one."""
    api.rig.clock.t += 1


def test_afterok_waits_for_the_job_to_complete_and_starts_in_the_cycle_that_hears_it(api: Api) -> None:
    a = submitted(api, "chen", outcome=Outcome(duration=600, exit_code=0))
    b = submitted(api, "chen", dependency=f"afterok:{a}")
    free = submitted(api, "chen")  # the fleet has room for b too: only its dependency keeps it waiting
    assert job(api, b)["dependency"] == f"afterok:{a}"
    tick(api, 1)
    assert (state(api, a), state(api, b), state(api, free)) == ("running", "pending", "running")
    tick(api, 1)  # the reason is written from the snapshot: the cycle after a started says a runs
    reason = why(api, b)
    assert reason["blocker"] == "dependency"
    assert f"afterok:{a} ({a} is running)" in reason["message"]
    queued = api.call("GET", "/jobs/queue", "ben").json()["items"]
    assert [(q["id"], q["blocker"]) for q in queued] == [(b, "dependency")]
    tick(api, 300)
    assert state(api, b) == "pending"
    tick(api, 400)  # a exited 0 meanwhile: the step hears it, then its cycle starts b
    assert (state(api, a), state(api, b)) == ("completed", "running")


def test_afternotok_is_cancelled_when_the_job_succeeds_and_a_chain_ends_in_the_same_cycle(api: Api) -> None:
    ok = submitted(api, "chen", outcome=Outcome(duration=60, exit_code=0))
    bad = submitted(api, "chen", outcome=Outcome(duration=60, exit_code=3))
    on_failure = submitted(api, "chen", dependency=f"afternotok:{ok}")
    after_that = submitted(api, "chen", dependency=f"afterok:{on_failure}")
    cleanup = submitted(api, "chen", dependency=f"afternotok:{bad}")
    tick(api, 1)
    assert {j: state(api, j) for j in (on_failure, after_that, cleanup)} == dict.fromkeys(
        (on_failure, after_that, cleanup), "pending"
    )
    tick(api, 120)
    assert (state(api, ok), state(api, bad)) == ("completed", "failed")
    assert state(api, on_failure) == "cancelled"
    assert job(api, on_failure)["state_reason"] == (
        f"cancelled: dependency never satisfied: afternotok:{ok} ({ok} completed)"
    )
    assert state(api, after_that) == "cancelled"  # the same cycle: its dependency was cancelled
    assert f"afterok:{on_failure} ({on_failure} was cancelled)" in job(api, after_that)["state_reason"]
    assert state(api, cleanup) == "running"
    assert api.call("GET", f"/jobs/{on_failure}/why", "ada").status_code == 404  # no reason left behind


def test_afterany_and_after_and_a_cancelled_dependency(api: Api) -> None:
    a = submitted(api, "chen", outcome=Outcome(duration=60, exit_code=1), priority=10)
    started = submitted(api, "chen", dependency=f"after:{a}")
    ended = submitted(api, "chen", dependency=f"afterany:{a}")
    tick(api, 1)
    assert (state(api, a), state(api, started), state(api, ended)) == ("running", "pending", "pending")
    tick(api, 1)  # a has started: `after` holds
    assert (state(api, started), state(api, ended)) == ("running", "pending")
    assert f"afterany:{a} ({a} is running)" in why(api, ended)["message"]
    tick(api, 100)  # a failed: afterany holds anyway
    assert state(api, ended) == "running"

    waiting = submitted(api, "ben", dependency="afterok:" + submitted(api, "ben", hold=True))
    first = job(api, waiting)["dependency"].split(":")[1]
    tick(api, 1)
    assert why(api, waiting)["blocker"] == "dependency" and f"{first} is pending" in why(api, waiting)["message"]
    assert api.call("POST", f"/jobs/{first}/cancel", "ben").status_code == 200
    tick(api, 1)  # the cycle that cancels `first` cancels what waited for it to succeed
    assert (state(api, first), state(api, waiting)) == ("cancelled", "cancelled")


def test_any_of_starts_when_one_part_holds(api: Api) -> None:
    slow = submitted(api, "chen")
    quick = submitted(api, "chen", outcome=Outcome(duration=30, exit_code=0))
    either = submitted(api, "chen", dependency=f"afterok:{slow}?afterok:{quick}")
    tick(api, 1)
    assert "any one of its dependencies" in why(api, either)["message"]
    tick(api, 60)
    assert (state(api, slow), state(api, either)) == ("running", "running")


def test_singleton_runs_one_job_of_a_user_and_name_at_a_time(api: Api) -> None:
    first = submitted(api, "chen", name="sweep", outcome=Outcome(duration=300, exit_code=0))
    later(api)
    second = submitted(api, "chen", name="sweep", dependency="singleton")
    other_name = submitted(api, "chen", name="eval", dependency="singleton")
    other_user = submitted(api, "ben", name="sweep", dependency="singleton")
    tick(api, 1)
    assert {j: state(api, j) for j in (first, second, other_name, other_user)} == {
        first: "running", second: "pending", other_name: "running", other_user: "running",
    }  # fmt: skip
    tick(api, 1)
    assert f"singleton ({first} of the same name is running)" in why(api, second)["message"]
    tick(api, 400)
    assert (state(api, first), state(api, second)) == ("completed", "running")


def test_a_later_singleton_waits_for_an_earlier_job_of_its_name_even_one_still_pending(api: Api) -> None:
    earlier = submitted(api, "chen", name="sweep", hold=True)
    later(api)
    then = submitted(api, "chen", name="sweep", dependency="singleton")
    tick(api, 1)
    assert f"{earlier} of the same name, submitted earlier, is pending" in why(api, then)["message"]
    api.call("POST", f"/jobs/{earlier}/cancel", "chen")
    tick(api, 1)  # the cycle that cancels `earlier` lets `then` start
    assert (state(api, earlier), state(api, then)) == ("cancelled", "running")


REFUSED = [
    pytest.param(lambda a: "afterok:j-000000000000", "no job j-000000000000 that chen can see", id="no-such-job"),
    pytest.param(lambda a: f"afterok:{a}", "that chen can see", id="a-job-chen-may-not-see"),
    pytest.param(lambda a: "aftercorr:j-1", "unknown dependency type 'aftercorr'", id="unsupported-type"),
    pytest.param(lambda a: "afterok:j-1,afterany:j-2?afterok:j-3", "not both", id="mixed-separators"),
    pytest.param(lambda a: f"after:{a}+5", "is not supported", id="delay-after-start"),
]


@pytest.mark.parametrize(("dependency", "message"), REFUSED)
def test_a_dependency_that_cannot_be_accepted_is_refused_at_submission(api: Api, dependency: Any, message: str) -> None:
    dana = submitted(api, "dana", "detection")  # chen is no member of detection: dana's job is not chen's to see
    body = {"spec": {"budget": "pretrain", "command": ["train"], "dependency": dependency(dana)}}
    refused = api.call("POST", "/jobs", "chen", body)
    assert refused.status_code == 422, refused.text
    [problem] = refused.json()["problems"]
    assert problem["field"] == "dependency" and message in problem["reason"]


def test_a_dependency_beside_a_yaml_spec_replaces_its_own(api: Api) -> None:
    a = submitted(api, "chen")
    b = submitted(api, "chen")
    text = f"budget: pretrain\ncommand: train\ndependency: afterok:{a}\n"
    made = api.call("POST", "/jobs", "chen", {"yaml": text, "dependency": f"afterany:{b}"})
    assert made.status_code == 201, made.text
    assert made.json()["job"]["dependency"] == f"afterany:{b}"
    bad = api.call("POST", "/jobs", "chen", {"yaml": text, "dependency": "afterok"})
    assert bad.status_code == 422 and bad.json()["problems"][0]["field"] == "dependency"
    wrong_line = api.call("POST", "/jobs", "chen", {"yaml": "budget: pretrain\ncommand: train\ndependency: x:y\n"})
    assert wrong_line.json()["problems"][0]["line"] == 3


def test_a_dependency_on_a_job_array_waits_for_every_task(api: Api) -> None:
    body = {"spec": {"budget": "pretrain", "command": ["train"], "array": "0-1", "resources": {"gpus": 8}}}
    made = api.call("POST", "/jobs", "chen", body)
    assert made.status_code == 201, made.text
    array = str(made.json()["array"]["id"])
    api.rig.outcomes[f"{array}_0"] = Outcome(duration=60, exit_code=0)
    api.rig.outcomes[f"{array}_1"] = Outcome(duration=120, exit_code=0)
    after = submitted(api, "chen", dependency=f"afterok:{array}")
    failing = submitted(api, "chen", dependency=f"afternotok:{array}")
    tick(api, 1)
    tick(api, 90)  # task 0 completed, task 1 runs
    assert state(api, after) == "pending"
    assert f"afterok:{array} ({array} is running)" in why(api, after)["message"]
    tick(api, 60)
    assert (state(api, after), state(api, failing)) == ("running", "cancelled")
