"""Benchmark: the dashboard at Ai2 scale (issue 7) — response times of the page and of every API read it draws from,
over real HTTP, and optionally page render times in headless Chromium and the screenshots of docs/screenshots/.

Run: .venv/bin/python -m benchmarks.bench_web [--pending 10000] [--repeat 20] [--browser] [--screenshots DIR]

The database (SQLite) holds the Ai2-like organisation (512 nodes, ≈4,096 GPUs, ~60 budgets, 150 users) and the
demo's sample workload loaded as in bench_engine (≈600 running jobs and 10,000 pending), then runs the real engine
cycle (engine.cycle.cycle on SqlSchedulingStore, Allotment policy) once an hour for eight hours, so pending jobs carry
the engine's reasons and the ledger holds hours of charges for the burn-down; an operator drains two nodes. The API
(create_app, with the dashboard mounted) is served by uvicorn on a thread; each endpoint is fetched `--repeat` times
in a row and the median and worst times are printed. Targets: every page's reads under 300 ms (median).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from sqlalchemy import select
from tests.web.chromium import CHROMIUM, CHROMIUM_ARGS

from allotment.api import create_app
from allotment.config import load_config
from allotment.core.cycle import AllotmentPolicy
from allotment.engine.cycle import cycle as engine_cycle
from allotment.engine.setup import Settings
from allotment.service.tokens import issue
from allotment.store.db import make_engine
from allotment.store.migrate import upgrade
from allotment.store.tables import JobRow, RunRow
from benchmarks.bench_engine import AI2, _load

HOUR = 3600
ADMIN, OPERATOR, MEMBER = "abbyf", "akiral", "aarons"


class Clock:
    def __init__(self, now: int) -> None:
        self.t = now

    def now(self) -> int:
        return self.t


@contextmanager
def serve(tmp: Path, pending: int) -> Iterator[tuple[str, dict[str, str], Clock]]:
    db = make_engine(f"sqlite:///{tmp / 'bench.db'}")
    upgrade(db)
    t0 = time.perf_counter()
    store, now, running = _load(db, pending)
    policy = AllotmentPolicy()
    for hour in range(0, 8, 2):
        engine_cycle(store, policy.decide, now + hour * HOUR)
    clock = Clock(now + 8 * HOUR)
    engine_cycle(store, policy.decide, clock.t)
    took = time.perf_counter() - t0
    print(f"seeded {running} running and {pending:,} pending jobs, 5 engine cycles over 8 h in {took:.1f} s")
    cfg = load_config(AI2)
    app = create_app(store.sessions, Settings(config=AI2, data_dir=tmp), None, clock.now, config=cfg)
    tokens = {u: issue(app.state.context, u, name="bench").secret for u in (ADMIN, OPERATOR, MEMBER)}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = next(int(s.getsockname()[1]) for listener in server.servers for s in listener.sockets)
    try:
        yield f"http://127.0.0.1:{port}", tokens, clock
    finally:
        server.should_exit = True
        thread.join(10)
        db.dispose()


def contracted(http: httpx.Client, node: str, now: int) -> bool:
    """Whether everything on the node is guaranteed work inside its slice (it leaves at its slice end)."""
    jobs = http.get(f"/nodes/{node}").json()["jobs"]
    return bool(jobs) and all(j["run_class"] == "guaranteed" and (j["slice_end"] or 0) > now for j in jobs)


def samples(url: str, tokens: dict[str, str]) -> dict[str, str]:
    """One real id of each kind to fetch (a busy leaf budget, a job the engine started, a node), after draining two
    nodes that hold contracted work."""
    auth = {"Authorization": f"Bearer {tokens[ADMIN]}"}
    with httpx.Client(base_url=url, headers=auth, timeout=60) as http:
        overview = http.get("/dashboard/overview").json()
        fleet = http.get("/dashboard/fleet").json()
        ready = [n["name"] for c in fleet["clusters"] for n in c["nodes"] if n["used_gpus"] and n["state"] == "ready"]
        busy = [n for n in ready[:80] if contracted(http, n, fleet["now"])][:2]
        for node in busy:
            http.post(
                f"/nodes/{node}/drain",
                json={"why": "ECC errors"},
                headers={"Authorization": f"Bearer {tokens[OPERATOR]}"},
            ).raise_for_status()
        queue = http.get("/dashboard/queue?limit=50").json()
    budget = overview["fastest"][0]["name"] if overview["fastest"] else "ai2"
    return {"budget": budget, "node": busy[0], "cursor": queue["next_cursor"] or "", "job": running_job(url, tokens)}


def running_job(url: str, tokens: dict[str, str]) -> str:
    """A running job the engine started during the seeded cycles (so its history has more than its submission)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[ADMIN]}"}, timeout=60) as http:
        items = http.get("/jobs?state=running&limit=200").json()["items"]
        for item in items:
            if len(http.get(f"/jobs/{item['id']}").json()["history"]) > 1:
                return str(item["id"])
    return str(items[0]["id"])


def measure(url: str, tokens: dict[str, str], ids: dict[str, str], repeat: int) -> None:
    paths = [
        "/",
        "/ui/app.js",
        "/ui/pages.js",
        "/dashboard/overview",
        "/dashboard/budgets",
        f"/dashboard/budgets/{ids['budget']}/burndown",
        f"/dashboard/budgets/{ids['budget']}/charges?limit=20",
        f"/budgets/{ids['budget']}",
        f"/jobs?budget={ids['budget']}&limit=20",
        "/dashboard/queue?limit=50",
        f"/dashboard/queue?limit=50&cursor={ids['cursor']}",
        "/dashboard/fleet",
        f"/nodes/{ids['node']}",
        f"/jobs/{ids['job']}",
        "/jobs?limit=50",
    ]
    print(f"{'GET':<58} {'median':>8} {'max':>8} {'bytes':>9}")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[ADMIN]}"}, timeout=60) as http:
        for path in paths:
            times, size = [], 0
            for _ in range(repeat):
                t0 = time.perf_counter()
                response = http.get(path)
                times.append(time.perf_counter() - t0)
                response.raise_for_status()
                size = len(response.content)
            print(f"{path[:58]:<58} {statistics.median(times) * 1000:>6.1f}ms {max(times) * 1000:>6.1f}ms {size:>9,}")


def browse(url: str, tokens: dict[str, str], ids: dict[str, str], shots: Path | None) -> None:
    """Render each page in headless Chromium (Debian's, never a downloaded one); print load-to-drawn times and,
    with `shots`, save a screenshot of each."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as home:
        os.environ.setdefault("XDG_CONFIG_HOME", f"{home}/config")
        os.environ.setdefault("XDG_CACHE_HOME", f"{home}/cache")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(f"{url}/")
            if shots:
                shots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(shots / "login.png"))
            page.fill("#login-token", tokens[OPERATOR])
            page.click("#login-submit")
            page.wait_for_selector("#overview")
            pages = [
                ("overview", "#/", "#overview"),
                ("budgets", "#/budgets", "#budgets"),
                ("budget", f"#/budgets/{ids['budget']}", "#burndown"),
                ("queue", "#/queue", "#queue-table"),
                ("fleet", "#/fleet", "#fleet .node"),
                ("job", f"#/jobs/{ids['job']}", "#timeline"),
            ]
            print(f"{'page (Chromium, goto → drawn)':<40} {'ms':>8}")
            for name, route, ready in pages:
                page.goto(f"{url}/#/reports")  # leave the page, so the next goto draws from scratch
                page.wait_for_selector("#reports")
                t0 = time.perf_counter()
                page.goto(f"{url}/{route}")
                page.wait_for_selector(ready)
                print(f"{name:<40} {(time.perf_counter() - t0) * 1000:>8.0f}")
                if shots:
                    page.screenshot(path=str(shots / f"{name}.png"), full_page=name in ("budgets", "budget"))
            if shots:
                page.goto(f"{url}/#/fleet")
                page.click(f".node[data-node='{ids['node']}']")
                page.wait_for_selector("#node-empty-by")
                page.screenshot(path=str(shots / "fleet-drain.png"))
            browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--browser", action="store_true", help="also time page renders in headless Chromium")
    ap.add_argument("--screenshots", type=Path, help="save screenshots of the main pages here (implies --browser)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp), args.pending) as (url, tokens, _clock):
        with make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}").connect() as conn:
            jobs = len(conn.execute(select(JobRow.id)).all())
            runs = len(conn.execute(select(RunRow.id).where(RunRow.ended_at.is_(None))).all())
        print(f"{jobs:,} jobs, {runs} open runs")
        ids = samples(url, tokens)
        measure(url, tokens, ids, args.repeat)
        if args.browser or args.screenshots:
            browse(url, tokens, ids, args.screenshots)


if __name__ == "__main__":
    main()
