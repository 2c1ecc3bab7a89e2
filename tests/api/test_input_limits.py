"""Bounded input: every request over a limit of config.limits — body size (with and without Content-Length), env
entries and sizes, argument count and size, argv and env together, GPUs, replicas, durations, credits, free text,
integers in the query, YAML depth and long numbers — is refused in the error shape naming the field, and writes
nothing. The body limit holds while the body streams: no more than the limit is ever read."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import func, select
from starlette.types import Message

from allotment.config.limits import MAX_ARG_CHARS, MAX_ARGS, MAX_BODY_BYTES, MAX_ENV_ENTRIES, MAX_ENV_VALUE, MAX_TEXT
from allotment.ops.bounds import BoundRequests
from allotment.store.tables import AuditRow, JobRow
from tests.api.conftest import Api

HUGE = 10**20
"""Larger than any 64-bit integer column."""


def spec(**fields: Any) -> dict[str, Any]:
    return {"spec": {"budget": "pretrain", "command": ["train"], **fields}}


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    user: str
    status: int
    names: str | None
    """The field the first problem names (None: no problems, e.g. 413)."""
    body: Any = None
    chunked: bool = False
    """Send `body` in 64 KiB chunks without Content-Length."""
    reason: str = ""
    """A part of the message."""
    headers: dict[str, str] = field(default_factory=dict)


def _plan(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """A plan for the current period setting budget `lab` (with `body["budget"]`) and the plan's own `why`."""
    budget = {"name": "lab", "allocation": 23000, **body.get("budget", {})}
    document = {"period": api.ctx.period().id, "budgets": [budget], "why": body.get("why", "test")}
    return {"plan": document}


CASES = [
    pytest.param(
        Case("POST", "/jobs", "ben", 413, None, spec(env={"BIG": "x" * (2 * MAX_BODY_BYTES)}), reason="limit of"),
        id="body-over-the-limit-with-content-length",
    ),
    pytest.param(
        Case("POST", "/jobs", "ben", 413, None, spec(env={"BIG": "x" * (2 * MAX_BODY_BYTES)}), chunked=True),
        id="chunked-body-over-the-limit",
    ),
    pytest.param(
        Case("POST", "/jobs", "ben", 422, "env.BIG", spec(env={"BIG": "x" * (MAX_ENV_VALUE + 1)})),
        id="env-value-over-32KiB",
    ),
    pytest.param(
        Case("POST", "/jobs", "ben", 422, "env", spec(env={f"V{i}": "1" for i in range(MAX_ENV_ENTRIES + 1)})),
        id="env-over-256-entries",
    ),
    pytest.param(
        Case("POST", "/jobs", "ben", 422, "command", spec(command=["a"] * (MAX_ARGS + 1))),
        id="command-over-4096-arguments",
    ),
    pytest.param(
        Case("POST", "/jobs", "ben", 422, "command[0]", spec(command=["x" * (MAX_ARG_CHARS + 1)])),
        id="argument-over-32KiB",
    ),
    pytest.param(
        Case(
            "POST",
            "/jobs",
            "ben",
            422,
            "",
            spec(command=["x" * 30000] * 5, env={f"V{i}": "y" * 30000 for i in range(5)}),
            reason="command and env together",
        ),
        id="command-and-env-together-over-256KiB",
    ),
    pytest.param(Case("POST", "/jobs", "ben", 422, "resources.gpus", spec(resources={"gpus": 1e30})), id="gpus-1e30"),
    pytest.param(
        Case("POST", "/jobs", "ben", 422, "resources.replicas", spec(resources={"replicas": 1_000_000})),
        id="a-million-replicas",
    ),
    pytest.param(
        Case(
            "POST",
            "/jobs",
            "ben",
            422,
            "contract.slice",
            spec(contract={"class": "opportunistic", "slice": HUGE}),
        ),
        id="opportunistic-slice-over-ten-years",
    ),
    pytest.param(Case("POST", "/jobs", "ben", 422, "max_runtime", spec(max_runtime=HUGE)), id="max-runtime-overflow"),
    pytest.param(
        Case(
            "POST",
            "/jobs",
            "ben",
            422,
            "",
            {"yaml": "budget: pretrain\ncommand: [x]\nenv: " + "[" * 20000 + "]" * 20000},
            reason="not valid YAML",
        ),
        id="yaml-20k-deep",
    ),
    pytest.param(
        Case("POST", "/jobs", "ben", 422, "", {"yaml": "budget: pretrain\ncommand: [x]\npriority: " + "7" * 5000}),
        id="yaml-integer-of-5000-digits",
    ),
    pytest.param(
        Case("POST", "/sessions", "ben", 422, "env.BIG", {"budget": "pretrain", "env": {"BIG": "x" * 40000}}),
        id="session-env-value-over-32KiB",
    ),
    pytest.param(
        Case("GET", f"/budgets/pretrain?window={HUGE}", "ben", 422, "query.window"), id="budget-window-refused"
    ),
    pytest.param(
        Case("GET", f"/dashboard/overview?window={HUGE}", "ben", 422, "query.window"), id="dashboard-window-refused"
    ),
    pytest.param(Case("GET", "/jobs/{job}/logs?offset=" + str(HUGE), "ben", 422, "query.offset"), id="log-offset"),
    pytest.param(
        Case("POST", "/nodes/lab-h100-0000/drain", "fay", 422, "why", {"why": "w" * (MAX_TEXT + 1)}),
        id="drain-reason-over-4096",
    ),
    pytest.param(
        Case("POST", "/plans/apply", "ada", 422, "budgets[0].allocation", {"budget": {"allocation": HUGE}}),
        id="plan-allocation-of-1e20-credits",
    ),
    pytest.param(
        Case("POST", "/plans/apply", "ada", 422, "budgets[0].max_gpus", {"budget": {"max_gpus": 2**31}}),
        id="plan-max-gpus-over-int32",
    ),
    pytest.param(
        Case("POST", "/plans/apply", "ada", 422, "why", {"why": "w" * (MAX_TEXT + 1)}), id="plan-reason-over-4096"
    ),
]


def _counts(api: Api) -> tuple[int, int]:
    with api.rig.sessions() as s:
        return (
            int(s.scalar(select(func.count()).select_from(JobRow)) or 0),
            int(s.scalar(select(func.count()).select_from(AuditRow)) or 0),
        )


def _chunks(data: bytes) -> Iterator[bytes]:
    for i in range(0, len(data), 65536):
        yield data[i : i + 65536]


@pytest.mark.parametrize("case", CASES)
def test_input_over_a_limit_is_refused_in_the_error_shape_and_writes_nothing(api: Api, case: Case) -> None:
    path = case.path
    if "{job}" in path:
        path = path.format(job=api.submit("ben", "pretrain"))
    body = _plan(api, case.body) if case.path == "/plans/apply" else case.body
    before = _counts(api)
    if case.chunked:
        content = json.dumps(body).encode()
        headers = {**api.headers(case.user), "Content-Type": "application/json"}
        response = api.client.request(case.method, path, content=_chunks(content), headers=headers)
    else:
        response = api.call(case.method, path, case.user, body, headers=case.headers)
    assert response.status_code == case.status, response.text[:500]
    answer = response.json()
    assert set(answer) == {"error", "message", "problems"}
    assert answer["error"] == {413: "too_large", 422: "invalid"}[case.status]
    assert case.reason in answer["message"]
    if case.names is not None:
        assert answer["problems"][0]["field"] == case.names, answer
    assert _counts(api) == before, "a refused request writes nothing"


def test_the_body_limit_holds_while_the_body_streams() -> None:
    """The middleware stops reading at the first chunk past the limit, whatever the client would still send."""
    limit, chunk = 1000, 64
    pulled = 0

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"x" * chunk, "more_body": True}  # an endless body

    async def app(scope: Any, rcv: Any, send: Any) -> None:
        while True:
            await rcv()

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/jobs", "query_string": b"", "headers": []}
    asyncio.run(BoundRequests(app, max_body=limit)(scope, receive, send))
    assert pulled == limit // chunk + 1
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"] == "too_large"


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    pulled = 0

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"", "more_body": False}

    async def app(scope: Any, rcv: Any, send: Any) -> None:
        raise AssertionError("the application must not be called")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    headers = [(b"content-length", str(10**10).encode())]
    scope = {"type": "http", "method": "POST", "path": "/jobs", "query_string": b"", "headers": headers}
    asyncio.run(BoundRequests(app, max_body=1000)(scope, receive, send))
    assert pulled == 0 and sent[0]["status"] == 413
