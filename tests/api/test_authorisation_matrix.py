"""Every endpoint × every kind of caller, with the status each must get (401 for strangers and bad tokens, 403 for
known users acting outside their rights)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.api.conftest import Api

# The small example: eli is a member of segmentation (under vision); chen a member elsewhere (pretrain, finetune);
# dana leads vision (segmentation's parent); ben leads language; fay is the operator; ada the administrator.
PERSONAS = {
    "stranger": None,
    "bad token": "allot_not-a-real-token",
    "member": "eli",
    "other member": "chen",
    "lead of subtree": "dana",
    "lead elsewhere": "ben",
    "operator": "fay",
    "admin": "ada",
}
ORDER = list(PERSONAS)
NODE = "lab-h100-0001"
PLAN = {
    "period": "2026-11-01",
    "why": "more for segmentation",
    "budgets": [{"name": "segmentation", "allocation": 4500}, {"name": "detection", "allocation": 5500}],
}


def row(*codes: int) -> dict[str, int]:
    """Statuses in PERSONAS order: stranger, bad token, member, other member, lead, lead elsewhere, operator, admin."""
    return dict(zip(ORDER, codes, strict=True))


ANYONE = row(401, 401, 200, 200, 200, 200, 200, 200)
SUBMIT = row(401, 401, 201, 403, 201, 403, 403, 201)
VIEW = row(401, 401, 200, 403, 200, 403, 200, 200)
MANAGE = row(401, 401, 200, 403, 200, 403, 403, 200)
SELF_OR_ADMIN = row(401, 401, 201, 403, 403, 403, 403, 201)
LEADS = row(401, 401, 403, 403, 200, 403, 403, 200)
OPERATORS = row(401, 401, 403, 403, 403, 403, 200, 200)
ADMINS = row(401, 401, 403, 403, 403, 403, 403, 200)


@dataclass
class Case:
    name: str
    method: str
    path: Callable[[Api], str]
    expect: dict[str, int]
    body: Callable[[Api], Any] | None = None


def fixed(path: str) -> Callable[[Api], str]:
    return lambda _api: path


def eli_job(api: Api) -> str:
    return api.submit("eli", "segmentation", resources={"gpus": 8})


def eli_running_job(api: Api) -> str:
    """A job of eli's that runs (requeue acts on running jobs), the same one for every persona: a request is only
    recorded until the engine's next cycle, so each caller finds it running."""
    if not hasattr(api, "running_job"):
        job = api.submit("eli", "segmentation", resources={"gpus": 1}, priority=1000)
        api.rig.step(api.rig.clock.now() + 1)
        assert api.call("GET", f"/jobs/{job}", "ada").json()["state"] == "running"
        api.running_job = job  # type: ignore[attr-defined]
    return str(api.running_job)  # type: ignore[attr-defined]


def eli_array(api: Api) -> str:
    body = {"spec": {"budget": "segmentation", "command": ["train"], "array": "0-2%1"}}
    response = api.call("POST", "/jobs", "eli", body)
    assert response.status_code == 201, response.text
    return str(response.json()["array"]["id"])


def eli_session(api: Api) -> str:
    response = api.call("POST", "/sessions", "eli", {"budget": "segmentation", "gpus": 1})
    assert response.status_code == 201, response.text
    return str(response.json()["job"]["id"])


def eli_token(api: Api) -> str:
    response = api.call("POST", "/auth/tokens", "ada", {"user": "eli"})
    return str(response.json()["token"]["id"])


def sim_report(api: Api) -> str:
    folder = api.ctx.data_dir / "reports" / "run-1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text("# a simulation\n")
    return "/reports/simulations/run-1/report.md"


CASES = [
    Case("health", "GET", fixed("/health"), row(200, 200, 200, 200, 200, 200, 200, 200)),
    Case("liveness", "GET", fixed("/healthz"), row(200, 200, 200, 200, 200, 200, 200, 200)),
    Case("metrics", "GET", fixed("/metrics"), row(200, 200, 200, 200, 200, 200, 200, 200)),
    Case("me", "GET", fixed("/auth/me"), ANYONE),
    Case("login for eli", "POST", fixed("/auth/login"), SELF_OR_ADMIN, lambda a: {"user": "eli"}),
    Case("create token for eli", "POST", fixed("/auth/tokens"), SELF_OR_ADMIN, lambda a: {"user": "eli"}),
    Case("list own tokens", "GET", fixed("/auth/tokens"), ANYONE),
    Case(
        "revoke eli's token",
        "DELETE",
        lambda a: f"/auth/tokens/{eli_token(a)}",
        row(401, 401, 200, 403, 403, 403, 403, 200),
    ),
    Case(
        "submit",
        "POST",
        fixed("/jobs"),
        SUBMIT,
        lambda a: {"spec": {"budget": "segmentation", "command": "python train.py"}},
    ),
    Case("list jobs", "GET", fixed("/jobs?budget=segmentation"), ANYONE),
    Case("pending queue", "GET", fixed("/jobs/queue?budget=segmentation"), ANYONE),
    Case("job history", "GET", fixed("/jobs/history?budget=segmentation"), ANYONE),  # filtered to what each may see
    Case("get job", "GET", lambda a: f"/jobs/{eli_job(a)}", VIEW),
    Case("cancel job", "POST", lambda a: f"/jobs/{eli_job(a)}/cancel", MANAGE),
    Case("hold job", "POST", lambda a: f"/jobs/{eli_job(a)}/hold", MANAGE),
    Case("release job", "POST", lambda a: f"/jobs/{eli_job(a)}/release", MANAGE),
    Case("update job", "PATCH", lambda a: f"/jobs/{eli_job(a)}", MANAGE, lambda a: {"priority": 3}),
    Case("requeue job", "POST", lambda a: f"/jobs/{eli_running_job(a)}/requeue", MANAGE),
    Case("get array", "GET", lambda a: f"/arrays/{eli_array(a)}", VIEW),
    Case("cancel array", "POST", lambda a: f"/arrays/{eli_array(a)}/cancel", MANAGE),
    Case("hold array", "POST", lambda a: f"/arrays/{eli_array(a)}/hold", MANAGE),
    Case("release array", "POST", lambda a: f"/arrays/{eli_array(a)}/release", MANAGE),
    Case(
        "cancel by filter, own jobs",
        "POST",
        fixed("/jobs/cancel"),
        ANYONE,
        lambda a: {"budget": "segmentation", "dry_run": True},
    ),
    Case(
        "cancel eli's jobs by filter",
        "POST",
        fixed("/jobs/cancel"),
        row(401, 401, 200, 403, 403, 403, 403, 200),
        lambda a: {"user": "eli", "dry_run": True},
    ),
    Case("job logs", "GET", lambda a: f"/jobs/{eli_job(a)}/logs", VIEW),
    Case("why", "GET", lambda a: f"/jobs/{eli_job(a)}/why", VIEW),
    Case("request session", "POST", fixed("/sessions"), SUBMIT, lambda a: {"budget": "segmentation", "gpus": 1}),
    Case("session attach info", "GET", lambda a: f"/sessions/{eli_session(a)}", VIEW),
    Case("release session", "DELETE", lambda a: f"/sessions/{eli_session(a)}", MANAGE),
    Case("budget tree", "GET", fixed("/budgets"), ANYONE),
    Case("budget show", "GET", fixed("/budgets/segmentation"), ANYONE),
    Case("budget members", "GET", fixed("/budgets/segmentation/members"), ANYONE),
    Case("plan diff", "POST", fixed("/plans/diff"), LEADS, lambda a: {"plan": PLAN}),
    Case("plan apply", "POST", fixed("/plans/apply"), LEADS, lambda a: {"plan": PLAN}),
    Case("list nodes", "GET", fixed("/nodes"), ANYONE),
    Case("show node", "GET", fixed(f"/nodes/{NODE}"), ANYONE),
    Case("cordon", "POST", fixed(f"/nodes/{NODE}/cordon"), OPERATORS, lambda a: {"why": "flaky NIC"}),
    Case("drain", "POST", fixed(f"/nodes/{NODE}/drain"), OPERATORS, lambda a: {"why": "ECC errors"}),
    Case("resume", "POST", fixed(f"/nodes/{NODE}/resume"), OPERATORS),
    Case("forced drain", "POST", fixed(f"/nodes/{NODE}/drain"), ADMINS, lambda a: {"force": True, "why": "dead"}),
    Case("usage report", "GET", fixed("/reports/usage?budget=segmentation"), VIEW),
    Case("simulation reports", "GET", fixed("/reports/simulations"), ANYONE),
    Case("simulation report file", "GET", sim_report, ANYONE),
    Case("dashboard overview", "GET", fixed("/dashboard/overview"), ANYONE),
    Case("dashboard budgets", "GET", fixed("/dashboard/budgets"), ANYONE),
    Case("dashboard burn-down", "GET", fixed("/dashboard/budgets/segmentation/burndown"), ANYONE),
    Case("dashboard charges", "GET", fixed("/dashboard/budgets/segmentation/charges"), VIEW),
    Case("dashboard charge lines", "GET", fixed("/dashboard/budgets/segmentation/charge-lines"), VIEW),
    Case("dashboard queue", "GET", fixed("/dashboard/queue"), ANYONE),
    Case("dashboard fleet", "GET", fixed("/dashboard/fleet"), ANYONE),
]


def test_every_endpoint_answers_every_caller_as_the_roles_say(api: Api) -> None:
    mismatches: list[str] = []
    for case in CASES:
        for persona, user in PERSONAS.items():
            path = case.path(api)
            body = case.body(api) if case.body is not None else None
            token = api.tokens.get(user, user) if user is not None else None
            headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
            response = api.client.request(case.method, path, json=body, headers=headers)
            if response.status_code != case.expect[persona]:
                mismatches.append(
                    f"{case.name} as {persona}: {response.status_code} (expected {case.expect[persona]}) "
                    f"{response.text[:200]}"
                )
            elif response.status_code >= 400:
                assert response.json()["error"] in ("unauthenticated", "forbidden"), response.text
    assert not mismatches, "\n".join(mismatches)


def test_every_route_is_in_the_matrix(api: Api) -> None:
    """A new endpoint must be added to the matrix above."""
    schema = api.client.get("/openapi.json").json()
    routes = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    covered = {
        ("GET", "/health"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),  # no token either way; its 200/503 depends on the engine: tests/ops/test_health.py
        ("GET", "/metrics"),
        ("GET", "/auth/me"),
        ("POST", "/auth/login"),
        ("POST", "/auth/tokens"),
        ("GET", "/auth/tokens"),
        ("DELETE", "/auth/tokens/{token_id}"),
        ("POST", "/jobs"),
        ("GET", "/jobs"),
        ("GET", "/jobs/queue"),
        ("GET", "/jobs/history"),
        ("GET", "/jobs/{job_id}"),
        ("POST", "/jobs/{job_id}/cancel"),
        ("POST", "/jobs/{job_id}/hold"),
        ("POST", "/jobs/{job_id}/release"),
        ("PATCH", "/jobs/{job_id}"),
        ("POST", "/jobs/{job_id}/requeue"),
        ("POST", "/jobs/cancel"),
        ("GET", "/arrays/{array_id}"),
        ("POST", "/arrays/{array_id}/cancel"),
        ("POST", "/arrays/{array_id}/hold"),
        ("POST", "/arrays/{array_id}/release"),
        ("GET", "/jobs/{job_id}/logs"),
        ("GET", "/jobs/{job_id}/why"),
        ("POST", "/sessions"),
        ("GET", "/sessions/{job_id}"),
        ("DELETE", "/sessions/{job_id}"),
        ("GET", "/budgets"),
        ("GET", "/budgets/{name}"),
        ("GET", "/budgets/{name}/members"),
        ("POST", "/plans/diff"),
        ("POST", "/plans/apply"),
        ("GET", "/nodes"),
        ("GET", "/nodes/{name}"),
        ("POST", "/nodes/{name}/cordon"),
        ("POST", "/nodes/{name}/drain"),
        ("POST", "/nodes/{name}/resume"),
        ("GET", "/reports/usage"),
        ("GET", "/reports/simulations"),
        ("GET", "/reports/simulations/{path}"),
        ("GET", "/dashboard/overview"),
        ("GET", "/dashboard/budgets"),
        ("GET", "/dashboard/budgets/{name}/burndown"),
        ("GET", "/dashboard/budgets/{name}/charges"),
        ("GET", "/dashboard/budgets/{name}/charge-lines"),
        ("GET", "/dashboard/queue"),
        ("GET", "/dashboard/fleet"),
    }
    assert routes == covered
