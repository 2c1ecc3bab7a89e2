"""Seeds: the seed lists a user writes, and each metric's mean and 95 % interval across seeds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from allotment.cli.main import app
from allotment.sim.seeds import SeedError, interval, parse_seeds
from tests.sim.test_cli import ROOT, SCENARIO


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        pytest.param("1-5", [1, 2, 3, 4, 5], id="range"),
        pytest.param("1,3,9", [1, 3, 9], id="list"),
        pytest.param("2-4, 8", [2, 3, 4, 8], id="mixed"),
        pytest.param("7", [7], id="one"),
        pytest.param("3,1-3", [3, 1, 2], id="each-once-in-order"),
    ],
)
def test_a_seed_list_reads_as_written(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("5-1", "rising range", id="falling"),
        pytest.param("a", "not a seed or a range", id="word"),
        pytest.param("1-", "not a seed or a range", id="open-range"),
        pytest.param("-3", "not a seed or a range", id="negative"),
        pytest.param("1-5000", "at most 1000", id="too-many"),
    ],
)
def test_a_bad_seed_list_says_what_to_write(text: str, says: str) -> None:
    with pytest.raises(SeedError, match=says):
        parse_seeds(text)


def test_the_interval_is_students_t_and_leaves_out_missing_values() -> None:
    i = interval([1.0, 2.0, 3.0, math.nan])
    assert (i.n, i.mean) == (3, 2.0)
    assert i.half == pytest.approx(4.303 / math.sqrt(3))  # sd 1, t(2 df) = 4.303
    one = interval([5.0])
    assert (one.low, one.mean, one.high) == (5.0, 5.0, 5.0)
    assert interval([math.nan]).n == 0


def test_seeds_in_parallel_report_the_same_as_one_by_one(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO.format(org=ROOT / "examples" / "small" / "allotment.yaml"))
    tables = []
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}"
        result = CliRunner().invoke(
            app, ["simulate", str(scenario), "--seeds", "1-3", "--jobs", jobs, "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        md = (out / "report.md").read_text()
        assert "## Across 3 seeds" in md and "## Per seed" in md
        tables.append([line for line in md.splitlines() if line.startswith("|")])
    assert tables[0] == tables[1]
    per_seed = [row for row in tables[0] if row.startswith("| allotment | ")]
    assert [row.split("|")[2].strip() for row in per_seed] == ["1", "2", "3"]


def test_a_bad_seed_list_exits_2(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO.format(org=ROOT / "examples" / "small" / "allotment.yaml"))
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--seeds", "9-1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "rising range" in result.output
