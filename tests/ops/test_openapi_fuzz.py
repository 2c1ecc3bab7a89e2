"""schemathesis against the OpenAPI description: generated requests for every operation — valid (positive) and
invalid (negative) bodies, paths and query strings, as an administrator — never get a 5xx, and every answer
conforms to the description: its status is one the operation declares, its content type is the declared one, and
its body matches the declared schema (errors too: the one ErrorBody shape). Bounded (EXAMPLES per operation and
mode, derandomized) to fit CI on two cores; the real application on a real SQLite store with a few jobs in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode
from schemathesis.generation.case import Case

from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from tests.api.conftest import make_api

EXAMPLES = 15
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["positive", "negative"])
def test_generated_requests_get_no_server_error_and_conform_to_the_schema(tmp_path: Path, mode: GenerationMode) -> None:
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
        strategy: st.SearchStrategy[Case[Any]] = operation.as_strategy(mode)

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
            case.validate_response(response, checks=CHECKS, headers=headers)

        try:
            check()
        except Unsatisfiable:  # negative mode, an operation without inputs: nothing invalid to send
            continue
        except Exception as exc:  # collect every operation's failure, report them together
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:600]}")
    if failures:
        pytest.fail("server errors, or answers the schema does not describe:\n" + "\n".join(failures))
