"""Every scenario under examples/sim is valid: it loads, names known policies, and its files exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from allotment.sim.scenario import load_scenario, make_policy

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(
    p for p in (ROOT / "examples" / "sim").glob("*.yaml") if "workload" in (yaml.safe_load(p.read_text()) or {})
)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_an_example_scenario_loads_with_its_files_and_policies(path: Path) -> None:
    spec = load_scenario(path)
    for name in spec.policies:
        make_policy(name)
    w = spec.workload
    files = [w.synthetic.organisation] if w.synthetic is not None else []
    if w.trace is not None:
        files += [w.trace.path, *([w.trace.organisation] if w.trace.organisation is not None else [])]
    assert files and all(f.exists() for f in files), files


def test_the_examples_include_a_job_list_and_the_full_scale_lab() -> None:
    assert {"job-list", "ai2-full", "ai2-like"} <= {p.stem for p in SCENARIOS}
