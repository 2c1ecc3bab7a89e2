"""The differential test of issue 20: the same workload through the in-memory store and the SQL store (SQLite) makes
the same decisions (every run: who, when, where, how it ended), the same ledger (each budget's balance per period, and
when each ran out) and the same report, on the Ai2-like scenario (3 days), a day of ITP and a day of Philly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from allotment.sim import metrics
from allotment.sim.runner import Simulation
from allotment.sim.scenario import build_workload, load_scenario, make_policy

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    pytest.param("ai2-like.yaml", None, id="ai2-like-3-days"),
    pytest.param("itp-contended.yaml", 1.0, id="itp-one-day"),
    pytest.param("philly-contended.yaml", 1.0, id="philly-one-day"),
]


@pytest.mark.parametrize(("scenario", "days"), CASES)
def test_memory_and_sqlite_make_the_same_decisions_ledger_and_report(
    scenario: str, days: float | None, tmp_path: Path
) -> None:
    spec = load_scenario(ROOT / "examples" / "sim" / scenario)
    if days is not None:
        assert spec.workload.trace is not None
        trace = spec.workload.trace.model_copy(update={"days": days})
        spec = spec.model_copy(update={"workload": spec.workload.model_copy(update={"trace": trace})})
    workload = build_workload(spec, tmp_path)
    memory, sqlite = (
        Simulation(workload, make_policy("allotment"), dataclasses.replace(spec.options(), store=store)).run()
        for store in ("memory", "sqlite")
    )
    assert len(memory.runs) > 100  # enough decisions to compare
    assert memory.cycles == sqlite.cycles
    assert memory.runs == sqlite.runs
    assert memory.jobs == sqlite.jobs
    assert memory.balances == sqlite.balances
    assert memory.exhausted == sqlite.exhausted
    assert metrics.compute(memory) == metrics.compute(sqlite)
