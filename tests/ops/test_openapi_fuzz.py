"""schemathesis against the OpenAPI description: generated requests for every operation — valid and invalid
bodies, paths and query strings, as an administrator — never get a 5xx. Bounded (EXAMPLES per operation) to fit
the test budget; the real application on a real SQLite store with a few jobs in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation.case import Case

from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.api.conftest import make_api

EXAMPLES = 6


def test_no_generated_request_gets_a_server_error(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    upgrade(engine)
    api = make_api(engine, tmp_path)
    for _ in range(3):
        api.submit("ben", "pretrain", resources={"gpus": 8})
    api.rig.step()
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 20
    headers = {"Authorization": f"Bearer {api.tokens['fay']}"}
    failures: list[str] = []
    for operation in operations:
        strategy: st.SearchStrategy[Case[Any]] = operation.as_strategy()

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def check(case: Case[Any]) -> None:
            response = case.call(headers=headers)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} → {response.status_code}: {response.text[:200]}")
            case.validate_response(response, checks=[not_a_server_error], headers=headers)

        try:
            check()
        except Exception as exc:  # collect every operation's failure, report them together
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:300]}")
    if failures:
        pytest.fail("server errors on generated input:\n" + "\n".join(failures))
