"""The client commands against a server on PostgreSQL: the same path through the real API and engine, on the
production database (skipped locally, failed under CI=true, when PostgreSQL is unreachable)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Allot
from tests.sdk.live import LiveServer, live_server, wait_for

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("cli-pg") / "data", postgres=True) as server:
        yield server


def test_run_queue_status_logs_session_budgets_and_nodes(allot: Allot, tmp_path: Path) -> None:
    job = allot.json("ben", "run", "--budget", "pretrain", "--gpus", "4", "--name", "pg", "--",
                     sys.executable, "-c", "import time; time.sleep(1); print('on postgres')")["job"]  # fmt: skip
    wait_for(lambda: allot.json("ben", "status", job["id"])["state"] == "completed", "the job to complete")
    assert allot("ben", "logs", "-f", job["id"]).stdout == "on postgres\n"
    detail = allot.json("ben", "status", job["id"])
    assert detail["runs"][0]["exit_code"] == 0 and detail["charged_micro"] > 0
    assert job["id"] in {j["id"] for j in allot.json("ada", "queue", "--state", "completed")["items"]}
    session = allot.json(
        "eli", "session", "--budget", "segmentation", "--gpus", "2", "--length", "10m", "--timeout", "90"
    )
    assert session["ready"]
    allot("eli", "cancel", session["job"]["id"])
    tree = allot.json("ben", "budget", "tree")
    pretrain = next(b for b in tree["budgets"] if b["name"] == "pretrain")
    assert pretrain["used_micro"] > 0 and pretrain["remaining_micro"] < pretrain["allocation_micro"]
    assert allot.json("fay", "node", "drain", "lab-h100-0001", "--why", "pg")["node"]["state"] == "draining"
    assert allot.json("fay", "node", "resume", "lab-h100-0001")["state"] == "ready"
    assert "login" in allot(None, "queue", env={"ALLOT_TOKEN": "allot_bad"}, code=4).stderr
