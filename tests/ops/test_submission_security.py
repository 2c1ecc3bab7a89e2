"""Submissions cannot choose another identity or another user's budget, and a command given as a string is split
into arguments (shlex), never handed to a shell: through the HTTP API as a client sends them. (That each
executor runs the argument vector verbatim is tested in tests/executors: test_local_executor.py and
slurm/test_slurm_launch.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from allotment.store.tables import JobRow
from tests.api.conftest import make_api


@pytest.mark.parametrize(
    ("user", "spec", "status", "says"),
    [
        pytest.param("ben", {"budget": "pretrain", "command": ["x"], "user": "ada"}, 422, "user", id="names-a-user"),
        pytest.param("ben", {"budget": "pretrain", "command": ["x"], "owner": "ada"}, 422, "owner", id="an-owner"),
        pytest.param("ben", {"budget": "detection", "command": ["x"]}, 403, "not a member", id="foreign-budget"),
        pytest.param("ben", {"budget": "infrastructure", "command": ["x"]}, 422, "unknown budget", id="infra"),
        pytest.param("eli", {"budget": "vision", "command": ["x"]}, 422, "sub-budgets", id="a-parent-budget"),
    ],
)
def test_a_spec_cannot_pick_an_identity_or_a_budget_its_user_may_not_charge(
    db: Engine, tmp_path: Path, user: str, spec: dict[str, Any], status: int, says: str
) -> None:
    api = make_api(db, tmp_path)
    response = api.call("POST", "/jobs", user, {"spec": spec})
    assert response.status_code == status, response.text
    assert says in response.text
    with api.rig.sessions() as s:
        assert s.scalars(select(JobRow)).first() is None


def test_jobs_run_as_the_token_holder_and_string_commands_are_split_not_shelled(db: Engine, tmp_path: Path) -> None:
    api = make_api(db, tmp_path)
    command = "python -c 'print(1)' ; rm -rf / $(touch pwned) `id` > out && echo \"a b\""
    response = api.call("POST", "/jobs", "ben", {"spec": {"budget": "pretrain", "command": command}})
    assert response.status_code == 201, response.text
    job = api.call("GET", f"/jobs/{response.json()['job']['id']}", "ben").json()
    assert job["user"] == "ben"
    assert job["command"] == [
        "python", "-c", "print(1)", ";", "rm", "-rf", "/", "$(touch", "pwned)", "`id`", ">", "out", "&&", "echo", "a b",
    ]  # fmt: skip
