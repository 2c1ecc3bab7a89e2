"""The mypyc-compiled core (decision 40) decides exactly as the pure one: every equivalence case, every decision and
pending reason, compared in a canonical form; so do the compiled baseline policies (decision 72). Builds the
compiled wheel with scripts/build-compiled-core (a C compiler and the Python headers are needed; in CI a failure to
build fails this test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _decisions(pythonpath: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    run = subprocess.run(
        [sys.executable, "-m", "tests.core.compiled_check"],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found: dict[str, object] = json.loads(run.stdout)
    return found


def test_the_compiled_core_decides_exactly_as_the_pure_one(tmp_path: Path) -> None:
    built = tmp_path / "compiled"
    run = subprocess.run(
        [str(ROOT / "scripts" / "build-compiled-core"), str(built)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    pure = _decisions(str(ROOT))
    compiled = _decisions(f"{built}{os.pathsep}{ROOT}")
    assert str(pure["core"]).endswith(".py") and str(compiled["core"]).endswith(".so")
    assert isinstance(pure["cases"], dict) and isinstance(compiled["cases"], dict)
    assert list(compiled["cases"]) == list(pure["cases"])
    differing = [name for name in pure["cases"] if compiled["cases"][name] != pure["cases"][name]]
    assert not differing, f"the compiled core decides otherwise in {differing}"
    # the baselines are compiled beside it (the simulator's evaluation runs them at full scale) and decide alike
    assert str(pure["policies"]).endswith(".py") and str(compiled["policies"]).endswith(".so")
    assert isinstance(pure["baselines"], dict) and isinstance(compiled["baselines"], dict)
    assert list(compiled["baselines"]) == list(pure["baselines"]) and len(pure["baselines"]) == 5
    for policy, by_case in pure["baselines"].items():
        differing = [name for name in by_case if compiled["baselines"][policy][name] != by_case[name]]
        assert not differing, f"the compiled {policy} baseline decides otherwise in {differing}"
    # nor may the compiled build leave reference cycles (a compiled closure keeping state makes one with its
    # environment): everything a cycle builds is freed by reference counting
    garbage = compiled["cyclic_garbage"]
    assert isinstance(garbage, dict) and set(garbage.values()) == {0}, garbage
    # the decision records are immutable when compiled (mypyc enforces their Final fields) and still pickle
    records = compiled["records"]
    assert isinstance(records, dict) and records and all(records.values()), records
