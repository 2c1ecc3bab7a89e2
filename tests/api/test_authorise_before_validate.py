"""Rights are checked before a request's content is validated: a caller who may change no budget is refused a
budget plan, and a user in no budget a submission, with 403 at the cost of a token check — never after parsing a
huge body (the review's 50,000-budget plan kept the server busy for minutes before its 403)."""

from __future__ import annotations

from typing import Any

import pytest

from allotment.service.tokens import issue
from allotment.store.tables import UserRow
from tests.api.conftest import Api

HUGE = 8_000
"""Entries of the oversized request. Each one is invalid, so a server that validated first would answer 422. The
body stays under the server's default body limit (1 MiB), which would otherwise answer 413 before either check."""


def huge_plan() -> dict[str, Any]:
    budgets = [{"name": f"b{i}", "parent": "language", "allocation": "many", "extra": i} for i in range(HUGE)]
    return {"plan": {"period": "2026-11-01", "why": "grab", "budgets": budgets}}


def huge_spec() -> dict[str, Any]:
    return {"spec": {"budget": "pretrain", "command": ["x"] * HUGE, **{f"key{i}": i for i in range(HUGE)}}}


@pytest.mark.parametrize(
    ("method", "path", "user", "body"),
    [
        pytest.param("POST", "/plans/diff", "zoe", huge_plan, id="plan-diff-by-a-user-in-no-budget"),
        pytest.param("POST", "/plans/apply", "zoe", huge_plan, id="plan-apply-by-a-user-in-no-budget"),
        pytest.param("POST", "/plans/diff", "chen", huge_plan, id="plan-diff-by-a-member-who-leads-nothing"),
        pytest.param("POST", "/plans/apply", "fay", huge_plan, id="plan-apply-by-an-operator"),
        pytest.param("POST", "/jobs", "zoe", huge_spec, id="submit-by-a-user-in-no-budget"),
        pytest.param(
            "POST", "/sessions", "zoe", lambda: {"budget": "pretrain", "gpus": 1}, id="session-by-a-user-in-no-budget"
        ),
    ],
)
def test_a_caller_without_the_right_gets_403_before_the_body_is_validated(
    api: Api, method: str, path: str, user: str, body: Any
) -> None:
    with api.rig.sessions.begin() as session:
        session.add(UserRow(name="zoe", admin=False))
    api.tokens["zoe"] = issue(api.ctx, "zoe").secret  # a known user with no role anywhere
    response = api.call(method, path, user, body())
    assert response.status_code == 403, response.text[:300]
    answer = response.json()
    assert answer["error"] == "forbidden" and answer["problems"] == []
    assert user in answer["message"]


def test_a_lead_still_gets_every_problem_of_an_invalid_plan(api: Api) -> None:
    plan = {"plan": {"period": "2026-11-01", "budgets": [{"name": "x", "parent": "language", "allocation": "many"}]}}
    response = api.call("POST", "/plans/diff", "ben", plan)
    assert response.status_code == 422 and response.json()["problems"][0]["field"] == "budgets[0].allocation"
