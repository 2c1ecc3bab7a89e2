"""Structured logs: JSON lines that carry the job and budget ids of scheduling events, and no secret — API tokens,
bearer credentials and database passwords — ever reaches a log line, whatever logs it."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from allotment.ops.logs import JsonFormatter, RedactSecrets, configure_logging, redact
from allotment.ops.metrics import ObservedStore
from tests.api.conftest import make_api


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Everything logged at DEBUG and above, through the production handler set-up (JSON, redaction)."""
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    configure_logging("json", logging.DEBUG)
    out = io.StringIO()
    root.handlers[0].setStream(out)  # type: ignore[attr-defined]
    try:
        yield out
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("token allot_AbC123-_xyzXYZ0987 used", "token allot_*** used", id="api-token"),
        pytest.param("Authorization: Bearer abc.def-0123456789", "Authorization: Bearer ***", id="bearer"),
        pytest.param("postgresql+psycopg://app:s3cr%40t@db:5432/a", "postgresql+psycopg://app:***@db:5432/a", id="url"),
        pytest.param("sqlite:////var/lib/allotment.db", "sqlite:////var/lib/allotment.db", id="no-secret"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_json_lines_carry_extra_fields_and_redact_arguments_and_tracebacks() -> None:
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "login with %s", ("allot_topsecretvalue1",), None)
    record.job = "j-1"
    record.budget = "pretrain"
    try:
        raise RuntimeError("failed for Bearer allot_topsecretvalue2")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    assert RedactSecrets().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "login with allot_***" and line["job"] == "j-1" and line["budget"] == "pretrain"
    assert line["level"] == "error" and line["ts"].endswith("Z")
    assert "topsecret" not in json.dumps(line) and "RuntimeError" in line["exc"]


def test_no_secret_is_logged_while_serving_and_scheduling(db: Engine, tmp_path: Path, captured: io.StringIO) -> None:
    api = make_api(db, tmp_path)
    api.rig.engine = dataclasses.replace(api.rig.engine, store=ObservedStore(api.rig.store, api.rig.sessions))
    created = api.call("POST", "/auth/tokens", "eli", {"user": "eli", "name": "laptop"})
    secret = created.json()["secret"]
    job = api.submit("ben", "pretrain", resources={"gpus": 8})
    api.client.get("/jobs", headers={"Authorization": f"Bearer {secret}"})
    api.client.get("/jobs", headers={"Authorization": "Bearer allot_notavalidtokenatall"})
    api.rig.step()
    logging.getLogger("allotment.test").warning("connecting to %s", db.url.render_as_string(hide_password=False))
    logging.getLogger("allotment.test").info("client sent %s", {"Authorization": f"Bearer {secret}"})
    text = captured.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines, "nothing was logged"
    for value in (*api.tokens.values(), secret, "allot_notavalidtokenatall"):
        assert value not in text
    start = next(line for line in lines if line.get("event") == "start" and line.get("job") == job)
    assert start["budget"] == "pretrain" and start["logger"] == "allotment.decisions"
