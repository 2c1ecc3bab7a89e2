"""`allot demo`: one cycle of the real Allotment policy on the sample workload, as tables or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from allotment.cli.main import app, example_config

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
runner = CliRunner()


@pytest.fixture(scope="module")
def ai2_json() -> dict[str, Any]:
    result = runner.invoke(app, ["demo", "--json", "--jobs", "25", "--seed", "3"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_default_configuration_is_the_repository_example() -> None:
    assert example_config() == ROOT / "examples" / "ai2" / "allotment.yaml"


def test_demo_json_has_every_part(ai2_json: dict[str, Any]) -> None:
    s = ai2_json["summary"]
    assert ai2_json["now_iso"] == "2026-11-11T14:00:00Z"
    assert s["gpus"] == 4096
    assert s["gpus_busy"] + s["gpus_free"] == s["gpus_usable"]
    assert s["starts"] == len(ai2_json["starts"]) > 0
    assert s["preemptions"] == len(ai2_json["preemptions"])
    assert s["renewals"] == len(ai2_json["renewals"])
    assert s["reservations"] == len(ai2_json["reservations"])
    assert s["jobs_pending"] == 2048
    assert s["still_pending"] == 2048 - s["starts"]
    assert sum(s["blockers"].values()) == s["still_pending"]
    assert len(ai2_json["pending"]) == 25
    for row in ai2_json["pending"]:
        assert row["blocker"] and row["message"]
        assert row["needed_gpus"] >= 1
        assert all({"kind", "detail", "start"} <= set(h) for h in row["hints"])
    for row in ai2_json["starts"]:
        assert row["gpus"] >= 1 and row["placement"] and row["rule"]
    started = {r["job"] for r in ai2_json["starts"]}
    assert not started & {r["job"] for r in ai2_json["pending"]}


def test_demo_is_deterministic(ai2_json: dict[str, Any]) -> None:
    again = runner.invoke(app, ["demo", "--json", "--jobs", "25", "--seed", "3"])
    assert json.loads(again.output) == ai2_json


def test_demo_tables_on_the_small_example() -> None:
    result = runner.invoke(app, ["demo", "--config", str(SMALL), "--jobs", "5", "--pending", "30"],
                           env={"COLUMNS": "220"})  # fmt: skip
    assert result.exit_code == 0, result.output
    for title in ("Starts (", "Preemptions (", "Renewals (", "Reservations (", "Pending: first 5 of", "Summary"):
        assert title in result.output
    assert "of 32 usable GPUs busy" in result.output


def test_demo_at_a_given_instant() -> None:
    result = runner.invoke(app, ["demo", "--config", str(SMALL), "--json", "--now", "2026-11-11T23:00:00Z"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["now_iso"] == "2026-11-11T23:00:00Z"
    bad = runner.invoke(app, ["demo", "--config", str(SMALL), "--now", "2026-11-11T23:00:00"])
    assert bad.exit_code == 2
    assert "timezone" in bad.output


def test_demo_with_a_broken_configuration(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(SMALL.read_text(encoding="utf-8").replace("credits:", "credit:"), encoding="utf-8")
    result = runner.invoke(app, ["demo", "--config", str(broken)])
    assert result.exit_code == 2
    assert "did you mean 'credits'" in result.output
