"""Jobs through the API: submission (object and YAML), idempotency, validation that leaves nothing behind, listing
with filters and pagination, details, cancellation."""

from __future__ import annotations

from sqlalchemy import func, select

from allotment.store.tables import JobEventRow, JobRow
from tests.api.conftest import Api

SPEC = """\
name: pretrain-7b
budget: pretrain
command: torchrun --nproc-per-node 8 train.py --config "configs/7b.yaml"
image: ghcr.io/lab/train:2026.11
env: {WANDB_PROJECT: pretrain, SEED: 7}
resources:
  gpus: 8
  replicas: 2
  gpu_types: [H100]
contract:
  class: guaranteed
  slice: 2h
  fallback_opportunistic: true
priority: 5
grace: 2m
max_runtime: 3d
"""


def _counts(api: Api) -> tuple[int, int]:
    with api.rig.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(JobRow)) or 0), int(
            s.scalar(select(func.count()).select_from(JobEventRow)) or 0
        )


def test_a_yaml_spec_is_submitted_as_the_caller_and_wakes_the_engine(api: Api) -> None:
    api.wake.clear()
    response = api.call("POST", "/jobs", "ben", {"yaml": SPEC})
    assert response.status_code == 201, response.text
    job = response.json()["job"]
    assert api.wake.is_set()
    assert job["user"] == "ben" and job["budget"] == "pretrain" and job["state"] == "pending"
    assert job["command"] == ["torchrun", "--nproc-per-node", "8", "train.py", "--config", "configs/7b.yaml"]
    assert job["env"] == {"WANDB_PROJECT": "pretrain", "SEED": "7"}
    assert (job["gpus"], job["replicas"], job["slice_seconds"], job["grace"], job["max_runtime"]) == (
        8,
        2,
        7200,
        120,
        3 * 86400,
    )
    assert job["fallback_opportunistic"] is True and job["priority"] == 5
    assert job["history"] == [
        {"at": api.rig.clock.now(), "from_state": None, "to_state": "pending", "reason": "submitted"}
    ]
    got = api.call("GET", f"/jobs/{job['id']}", "ben").json()
    assert got["image"] == "ghcr.io/lab/train:2026.11" and got["runs"] == [] and got["charged_micro"] == 0
    assert got == job, "the submission's answer is built without reading back: it must equal what GET reads"


def test_submission_is_idempotent_by_header_or_request_id(api: Api) -> None:
    body = {"spec": {"budget": "pretrain", "command": ["train"], "resources": {"gpus": 4}}}
    first = api.call("POST", "/jobs", "chen", body, headers={"Idempotency-Key": "abc-1"})
    again = api.call("POST", "/jobs", "chen", body, headers={"Idempotency-Key": "abc-1"})
    field = api.call("POST", "/jobs", "chen", {**body, "request_id": "abc-1"})
    assert (first.status_code, again.status_code, field.status_code) == (201, 200, 200)
    assert first.json()["job"]["id"] == again.json()["job"]["id"] == field.json()["job"]["id"]
    assert again.json()["created"] is False and first.json()["job"]["request_id"] == "abc-1"
    # the same key from another user is another request
    other = api.call("POST", "/jobs", "ben", body, headers={"Idempotency-Key": "abc-1"})
    assert other.status_code == 201 and other.json()["job"]["id"] != first.json()["job"]["id"]
    # the same key for different work is a conflict
    changed = {"spec": {"budget": "pretrain", "command": ["other"], "resources": {"gpus": 4}}}
    assert api.call("POST", "/jobs", "chen", changed, headers={"Idempotency-Key": "abc-1"}).status_code == 409
    mixed = api.call("POST", "/jobs", "chen", {**body, "request_id": "x"}, headers={"Idempotency-Key": "y"})
    assert mixed.status_code == 400
    assert _counts(api)[0] == 2


def test_bad_specs_name_field_line_and_reason_and_leave_nothing_behind(api: Api) -> None:
    before = _counts(api)
    cases = [
        ("budget: pretrain\ncommand: [train]\nresources:\n  gpu: 8\n", "resources.gpu", 4, "did you mean 'gpus'"),
        ("budget: pretrain\ncommand: [train]\nuser: ada\n", "user", 3, "unknown key 'user'"),
        ("budget: pretrain\ncommand: []\n", "command", 2, "at least 1"),
        ("budget: pretrain\ncommand: [x]\ngrace: soon\n", "grace", 3, "is not a duration"),
        ("budget: pretrain\ncommand: [x]\ncontract: {class: best-effort}\n", "contract.class", 3, "not one of"),
        ("budget: language\ncommand: [x]\n", "budget", 1, "has sub-budgets"),
        ("budget: nope\ncommand: [x]\n", "budget", 1, "unknown budget"),
        ("budget: pretrain\ncommand: [x]\ncontract:\n  slice: 12h\n", "contract.slice", 4, "run slice lasts"),
        ("budget: pretrain\ncommand: [x]\ngrace: 1h\n", "grace", 3, "longest grace"),
        (
            "budget: pretrain\ncommand: [x]\nresources:\n  gpu_types: [H100, A100]\n",
            "resources.gpu_types[1]",
            4,
            "unknown GPU type",
        ),
        (
            "budget: pretrain\ncommand: [x]\nkind: session\nresources: {gpus: 16}\n",
            "resources.gpus",
            4,
            "a session holds at most",
        ),
        ("budget: pretrain\ncommand: [x]\nenv: {CUDA_VISIBLE_DEVICES: '0'}\n", "env", 3, "set by the executor"),
        ("budget: pretrain\nbudget: finetune\ncommand: [x]\n", "budget", 2, "duplicate key"),
        ("budget: pretrain\ncommand: [x\n", "", 3, "invalid YAML"),
    ]
    for text, path, line, reason in cases:
        response = api.call("POST", "/jobs", "ben", {"yaml": text})
        assert response.status_code == 422, (text, response.text)
        body = response.json()
        assert body["error"] == "invalid"
        found = [p for p in body["problems"] if p["field"] == path]
        assert found, (text, body)
        assert found[0]["line"] == line and reason in found[0]["reason"], (text, found)
    several = api.call("POST", "/jobs", "ben", {"yaml": "budget: pretrain\ncommand: []\npriority: high\nfoo: 1\n"})
    assert {p["field"] for p in several.json()["problems"]} == {"command", "priority", "foo"}
    as_object = api.call("POST", "/jobs", "ben", {"spec": {"budget": "pretrain", "command": ["x"], "gpus": 8}})
    assert as_object.status_code == 422 and as_object.json()["problems"][0]["field"] == "gpus"
    assert as_object.json()["problems"][0]["line"] is None
    assert api.call("POST", "/jobs", "ben", {"spec": {}, "yaml": "x: 1"}).status_code == 400
    assert api.call("POST", "/jobs", "ben", {}).status_code == 400
    bad_json = api.client.post(
        "/jobs", content=b"{nope", headers={**api.headers("ben"), "Content-Type": "application/json"}
    )
    assert bad_json.status_code == 400
    assert _counts(api) == before


def test_listing_filters_and_pages_newest_first(api: Api) -> None:
    ids = []
    for i in range(7):
        api.rig.clock.t += 1
        ids.append(api.submit("chen" if i % 2 else "eli", "finetune", name=f"job-{i}"))
    page = api.call("GET", "/jobs?limit=3", "chen").json()
    assert [j["id"] for j in page["items"]] == ids[::-1][:3]
    seen = [j["id"] for j in page["items"]]
    while page["next_cursor"]:
        page = api.call("GET", f"/jobs?limit=3&cursor={page['next_cursor']}", "chen").json()
        seen += [j["id"] for j in page["items"]]
    assert seen == ids[::-1]
    mine = api.call("GET", "/jobs?user=chen", "eli").json()["items"]
    assert {j["user"] for j in mine} == {"chen"} and len(mine) == 3
    api.call("POST", f"/jobs/{ids[0]}/cancel", "eli")
    api.rig.step()
    states = api.call("GET", "/jobs?state=cancelled&budget=finetune", "eli").json()["items"]
    assert [j["id"] for j in states] == [ids[0]]
    assert api.call("GET", "/jobs?state=sleeping", "eli").status_code == 422
    assert api.call("GET", "/jobs?cursor=%%%", "eli").status_code == 400
    assert api.call("GET", "/jobs?limit=0", "eli").status_code == 422


def test_a_job_shows_its_history_runs_slices_and_charges_and_cancels_once(api: Api) -> None:
    job = api.submit("ben", "pretrain", resources={"gpus": 8})
    t = api.rig.clock.now()
    api.rig.step()
    api.rig.step(t + 600)
    detail = api.call("GET", f"/jobs/{job}", "ben").json()
    assert detail["state"] == "running"
    (run,) = detail["runs"]
    assert run["started_at"] == t and run["slice_end"] == t + 3600 and len(run["placement"][0]["gpus"]) == 8
    assert detail["slices"] == [{"run_id": run["id"], "start": t, "end": t + 3600, "kind": "grant"}]
    assert [h["to_state"] for h in detail["history"]] == ["pending", "running"]
    cancelled = api.call("POST", f"/jobs/{job}/cancel", "ben")
    assert cancelled.status_code == 200 and cancelled.json()["cancel_requested_at"] == t + 600
    api.rig.step(t + 700)
    api.rig.step(t + 701)
    detail = api.call("GET", f"/jobs/{job}", "ben").json()
    assert detail["state"] == "cancelled"
    charged = sum(-c["amount_micro"] for c in detail["charges"] if c["budget"] == "pretrain")
    assert detail["charged_micro"] == charged == 8 * 700 * 1_000_000 // 3600
    again = api.call("POST", f"/jobs/{job}/cancel", "ben")
    assert again.status_code == 409 and again.json()["error"] == "conflict"
    assert api.call("GET", "/jobs/j-missing", "ben").status_code == 404
