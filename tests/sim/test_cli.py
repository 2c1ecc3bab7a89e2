"""`allot simulate` end to end: a scenario file in, report.md, report.html and the plots out."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from allotment.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """
name: tiny lab
seed: 5
policies: [allotment]
workload:
  synthetic:
    organisation: {org}
    days: 0.15
    demand: 1.5
    drain_days: 0.1
simulation:
  resolution: 120
  faults: {{per_node_day: 1.0, repair: 1h}}
"""


def test_simulate_writes_both_reports_and_the_plots(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO.format(org=ROOT / "examples" / "small" / "allotment.yaml"))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--out", str(out)])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert "# Simulation: tiny lab" in md
    assert "| utilisation while demand > supply |" in md
    assert "<table>" in page and "Fairness per budget" in page
    for png in ("busy.png", "sessions.png", "waits.png", "fairness.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
        assert png in md and png in page
    assert "events/s" in md


def test_a_bad_scenario_is_refused_with_where_and_why(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: x\nworkload: {}\n")
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "give exactly one of `synthetic` or `trace`" in result.output


def test_an_unknown_policy_is_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO.format(org=ROOT / "examples" / "small" / "allotment.yaml"))
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--policies", "nope", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "unknown policy 'nope'" in result.output


def test_the_sql_store_path_reports_the_same_tables(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO.format(org=ROOT / "examples" / "small" / "allotment.yaml"))
    tables = []
    for store in ("memory", "sqlite"):
        out = tmp_path / store
        result = CliRunner().invoke(app, ["simulate", str(scenario), "--store", store, "--out", str(out)])
        assert result.exit_code == 0, result.output
        tables.append([line for line in (out / "report.md").read_text().splitlines() if line.startswith("|")])
    assert tables[0] and tables[0] == tables[1]


def test_an_unknown_store_is_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO.format(org=ROOT / "examples" / "small" / "allotment.yaml"))
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--store", "redis", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "redis" in result.output
