"""`allot config check`: a summary for a valid configuration, field-level problems and exit code 2 otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from allotment.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
AI2 = ROOT / "examples" / "ai2" / "allotment.yaml"
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
runner = CliRunner()


def test_valid_configuration_prints_a_summary() -> None:
    result = runner.invoke(app, ["config", "check", str(AI2)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "is valid" in result.output
    for text in ("jupiter", "titan", "augusta", "GPUs: 4,096", "B300 1,536", "69 in 3 levels", "Users: 150"):
        assert text in result.output


def test_summary_as_json() -> None:
    result = runner.invoke(app, ["config", "check", "--json", str(SMALL)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["valid"] is True
    assert data["gpus"] == 32
    assert data["gpus_by_type"] == {"H100": 32}
    assert data["budgets"]["levels"] == 3
    assert data["budgets"]["leaves"] == 4
    assert data["users"]["count"] == 6


def test_invalid_configuration_lists_problems_with_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = SMALL.read_text(encoding="utf-8")
    bad.write_text(text.replace("    parent: vision\n    allocation: 4000", "    parent: visoin\n    allocation: 4000")
                   .replace("  max_grace: 5m", "  max_grace: 5 min"), encoding="utf-8")  # fmt: skip
    result = runner.invoke(app, ["config", "check", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:" in result.output
    assert "policy.max_grace: '5 min' is not a duration" in result.output
    result = runner.invoke(app, ["config", "check", "--json", str(bad)])
    assert result.exit_code == 2
    data = json.loads(result.output)
    assert data["valid"] is False
    (problem,) = data["problems"]
    assert problem["path"] == "policy.max_grace"
    assert problem["line"] == text.splitlines().index("  max_grace: 5m") + 1


def test_cross_reference_problems_after_field_problems_are_fixed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = SMALL.read_text(encoding="utf-8")
    bad.write_text(text.replace("    parent: vision\n    allocation: 4000", "    parent: visoin\n    allocation: 4000"))
    result = runner.invoke(app, ["config", "check", "--json", str(bad)])
    assert result.exit_code == 2
    (problem,) = json.loads(result.output)["problems"]
    assert problem["path"] == "budgets[6].parent"
    assert problem["reason"] == "parent budget 'visoin' does not exist"


def test_the_installed_allot_command(tmp_path: Path) -> None:
    """The real console script, in a real process."""
    allot = shutil.which("allot", path=str(Path(sys.executable).parent)) or shutil.which("allot")
    assert allot is not None, "the allot console script is not installed"
    env = {**os.environ, "COLUMNS": "160"}
    ok = subprocess.run([allot, "config", "check", str(SMALL)], capture_output=True, text=True, env=env, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "is valid" in ok.stdout
    missing = subprocess.run(
        [allot, "config", "check", str(tmp_path / "none.yaml")], capture_output=True, text=True, env=env, check=False
    )
    assert missing.returncode == 2
    assert "no such file or directory" in missing.stdout
