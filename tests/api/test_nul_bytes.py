"""NUL bytes are refused (422, naming the field) everywhere a string could reach a process or the database: a job
spec's command, env, workdir and image (as JSON or YAML, escaped or raw), a session's command and env, free text
(a token's name, a drain's and a plan's reason), query parameters and the path. Nothing is written, so the
supervisor never meets an argument it cannot pass to exec (the old failure: "embedded null byte", the attempt
reported lost and relaunched forever)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from allotment.store.tables import ApiTokenRow, AuditRow, JobRow
from tests.api.conftest import Api


def spec(**fields: Any) -> dict[str, Any]:
    return {"spec": {"budget": "pretrain", "command": ["train"], **fields}}


def plan(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """An empty plan for the current period; `body` overrides the request's `why` or adds fields to the plan."""
    document = {"period": api.ctx.period().id, "budgets": [], **body.get("plan", {})}
    return {"plan": document, "why": body.get("why", "nightly")}


CASES = [
    pytest.param("POST", "/jobs", "ben", spec(command=["train", "--x=\x00"]), "command[1]", id="spec-argument"),
    pytest.param("POST", "/jobs", "ben", spec(command="train --x=\x00"), "command", id="spec-command-string"),
    pytest.param("POST", "/jobs", "ben", spec(env={"SEED": "7\x00"}), "env.SEED", id="spec-env-value"),
    pytest.param("POST", "/jobs", "ben", spec(workdir="/tmp/\x00"), "workdir", id="spec-workdir"),
    pytest.param("POST", "/jobs", "ben", spec(image="img\x00"), "image", id="spec-image"),
    pytest.param(
        "POST", "/jobs", "ben", {"yaml": 'budget: pretrain\ncommand: ["a\\0b"]\n'}, "command[0]", id="yaml-escaped"
    ),
    pytest.param("POST", "/jobs", "ben", {"yaml": "budget: pretrain\ncommand: [a\x00b]\n"}, "yaml", id="yaml-raw"),
    pytest.param(
        "POST", "/sessions", "ben", {"budget": "pretrain", "command": ["sh\x00"]}, "command.0", id="session-command"
    ),
    pytest.param(
        "POST", "/sessions", "ben", {"budget": "pretrain", "env": {"A": "\x00"}}, "env.A", id="session-env-value"
    ),
    pytest.param("POST", "/auth/tokens", "ben", {"user": "ben", "name": "laptop\x00"}, "name", id="token-name"),
    pytest.param("POST", "/nodes/lab-h100-0000/drain", "fay", {"why": "ECC\x00"}, "why", id="drain-reason"),
    pytest.param("POST", "/plans/apply", "ada", {"why": "q4\x00"}, "why", id="plan-reason"),
    pytest.param("POST", "/plans/apply", "ada", {"plan": {"why": "q4\x00"}}, "why", id="plan-document-reason"),
    pytest.param("GET", "/jobs?budget=pre%00train", "ben", None, "budget", id="query-parameter"),
    pytest.param("GET", "/dashboard/queue?user=ben%00", "ben", None, "user", id="dashboard-query-parameter"),
    pytest.param("GET", "/jobs/j-%00", "ben", None, "path", id="path"),
]


def _counts(api: Api) -> tuple[int, ...]:
    with api.rig.sessions() as s:
        return tuple(int(s.scalar(select(func.count()).select_from(t)) or 0) for t in (JobRow, AuditRow, ApiTokenRow))


@pytest.mark.parametrize(("method", "path", "user", "body", "field"), CASES)
def test_a_nul_byte_is_refused_at_its_field_and_writes_nothing(
    api: Api, method: str, path: str, user: str, body: dict[str, Any] | None, field: str
) -> None:
    if path == "/plans/apply":
        assert body is not None
        body = plan(api, body)
    before = _counts(api)
    response = api.call(method, path, user, body)
    assert response.status_code == 422, response.text[:500]
    answer = response.json()
    assert answer["error"] == "invalid" and set(answer) == {"error", "message", "problems"}
    assert answer["problems"][0]["field"] == field, answer
    assert "NUL" in answer["problems"][0]["reason"]
    assert _counts(api) == before, "a refused request writes nothing"
