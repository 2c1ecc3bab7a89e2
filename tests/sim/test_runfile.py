"""Saved runs: a report folder keeps its runs (runs.json), and runs made apart combine into the report one command
would have written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from allotment.cli.main import app
from allotment.sim import runfile
from allotment.sim.batch import Task, run_task
from tests.sim.test_cli import ROOT, SCENARIO


def _scenario(tmp_path: Path, name: str = "tiny.yaml") -> Path:
    scenario = tmp_path / name
    scenario.write_text(SCENARIO.format(org=ROOT / "examples" / "small" / "allotment.yaml"))
    return scenario


def _simulate(*args: str) -> str:
    result = CliRunner().invoke(app, ["simulate", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _tables(folder: Path) -> list[str]:
    return [line for line in (folder / "report.md").read_text().splitlines() if line.startswith("|")]


def test_saved_runs_read_back_as_they_were_computed(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    out = tmp_path / "one"
    _simulate(str(scenario), "--policies", "allotment,fifo", "--seeds", "1-2", "--out", str(out))
    runs = runfile.load(out)
    assert [(d.task.policy, d.task.seed) for d in runs.runs] == [
        ("allotment", 1),
        ("allotment", 2),
        ("fifo", 1),
        ("fifo", 2),
    ]
    computed = run_task(Task(scenario, "fifo", 2))
    # Metrics hold NaN (a quantile of nothing), never equal to itself, so the two are compared by their repr; the
    # wall time is the only field that may differ between two runs.
    assert repr(runs.runs[3].metrics) == repr(computed.metrics)
    assert (runs.runs[3].cycles, runs.runs[3].events, runs.runs[3].notes) == (
        computed.cycles,
        computed.events,
        computed.notes,
    )


def test_runs_made_apart_combine_into_the_report_of_one_command(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    together = tmp_path / "together"
    _simulate(str(scenario), "--policies", "allotment,fifo", "--seeds", "1-3", "--out", str(together))
    parts = []
    for policy, seeds in (("fifo", "1-3"), ("allotment", "2-3"), ("allotment", "1")):
        part = tmp_path / f"{policy}-{seeds}"
        _simulate(str(scenario), "--policies", policy, "--seeds", seeds, "--out", str(part))
        parts.append(str(part))
    combined = tmp_path / "combined"
    _simulate("--combine", ",".join(parts), "--out", str(combined))
    # Policies in the order they first appear, each policy's seeds in rising order.
    names = [(d.task.policy, d.task.seed) for d in runfile.load(combined).runs]
    assert names == [("fifo", 1), ("fifo", 2), ("fifo", 3), ("allotment", 1), ("allotment", 2), ("allotment", 3)]
    reordered = tmp_path / "reordered"
    _simulate("--combine", ",".join([parts[2], parts[1], parts[0]]), "--out", str(reordered))
    assert _tables(reordered) == _tables(together)
    assert "## Across 3 seeds" in (reordered / "report.md").read_text()


@pytest.mark.parametrize(
    ("case", "says"),
    [
        pytest.param("missing", "no such file", id="a-folder-without-runs"),
        pytest.param("twice", "allotment seed 1 is also in", id="a-seed-twice"),
        pytest.param("other-scenario", "combine runs of one scenario", id="two-scenarios"),
        pytest.param("not-json", "not a runs file", id="not-json"),
        pytest.param("bad-field", "runs.0.", id="a-field-of-the-wrong-type"),
        pytest.param("with-scenario", "give it no SCENARIO", id="a-scenario-too"),
    ],
)
def test_runs_that_cannot_be_combined_exit_2_with_the_reason(tmp_path: Path, case: str, says: str) -> None:
    scenario = _scenario(tmp_path)
    first = tmp_path / "first"
    _simulate(str(scenario), "--policies", "allotment", "--seed", "1", "--out", str(first))
    second = tmp_path / "second"
    args = ["--combine", f"{first},{second}", "--out", str(tmp_path / "out")]
    if case == "twice":
        _simulate(str(scenario), "--policies", "allotment", "--seed", "1", "--out", str(second))
    elif case == "other-scenario":
        _simulate(str(_scenario(tmp_path, "other.yaml")), "--policies", "fifo", "--seed", "1", "--out", str(second))
    elif case == "not-json":
        second.mkdir()
        (second / runfile.FILE).write_text("{not json")
    elif case == "bad-field":
        second.mkdir()
        body = json.loads((first / runfile.FILE).read_text())
        body["runs"][0]["cycles"] = "many"
        (second / runfile.FILE).write_text(json.dumps(body))
    elif case == "with-scenario":
        args = [str(scenario), *args]
    result = CliRunner().invoke(app, ["simulate", *args])
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())
    assert "Traceback" not in result.output
