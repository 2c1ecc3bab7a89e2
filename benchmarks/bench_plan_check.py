"""Benchmark: checking a budget plan (service.plans.diff_plan, what POST /plans/diff runs) as its size grows, and how
long a caller without the right to plan waits for the 403 (issue 22: a 50,000-budget plan kept the server busy for
minutes before refusing it).

Run: .venv/bin/python -m benchmarks.bench_plan_check [--sizes 1000 10000 50000] [--shape chain|flat]

A `chain` plan is n new budgets each under the previous one (the worst case for walking up the tree), `flat` n new
budgets under one parent. Prints the parse (pydantic) and check times per size and the time per budget, which stays
flat when the check is linear; then the time of the 403 for the largest plan over HTTP (FastAPI's TestClient, real
SQLite), which includes reading the JSON body but no validation of it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.engine.rig import SMALL, Rig

from allotment.api import create_app
from allotment.engine.setup import Settings
from allotment.service.plans import diff_plan, plan_from_data
from allotment.service.principal import Principal
from allotment.service.tokens import issue
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade


def plan(n: int, shape: str) -> dict[str, Any]:
    def parent(i: int) -> str:
        return "language" if shape == "flat" or i == 0 else f"p{i - 1}"

    budgets = [{"name": f"p{i}", "parent": parent(i), "allocation": 0} for i in range(n)]
    return {"period": "2026-11-01", "why": "benchmark", "budgets": budgets[::-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    parser.add_argument("--shape", choices=("chain", "flat"), default="chain")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="allot-bench-plan-") as scratch:
        engine = make_engine(f"sqlite:///{Path(scratch) / 'a.db'}")
        upgrade(engine)
        rig = Rig(engine)
        rig.step()
        app = create_app(rig.sessions, Settings(config=SMALL, data_dir=Path(scratch)), None, rig.clock.now)
        ctx = app.state.context
        admin = Principal("ada", {}, admin=True)
        print(f"{'budgets':>8} {'parse s':>8} {'check s':>8} {'µs/budget':>10}")
        for n in args.sizes:
            data = plan(n, args.shape)
            start = time.perf_counter()
            doc = plan_from_data(data)
            parsed = time.perf_counter()
            diff = diff_plan(ctx, admin, doc)
            checked = time.perf_counter()
            assert len(diff.changes) == n
            print(f"{n:>8} {parsed - start:>8.3f} {checked - parsed:>8.3f} {1e6 * (checked - start) / n:>10.1f}")
        secret = issue(ctx, "chen").secret  # a member who leads nothing
        body = {"plan": plan(max(args.sizes), args.shape)}
        http = TestClient(app, base_url="http://127.0.0.1")
        start = time.perf_counter()
        refused = http.post("/plans/diff", json=body, headers={"Authorization": f"Bearer {secret}"})
        took = time.perf_counter() - start
        print(f"403 for a {max(args.sizes)}-budget plan from a non-lead: {refused.status_code} in {took:.3f}s")
        engine.dispose()


if __name__ == "__main__":
    main()
