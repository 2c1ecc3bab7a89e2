"""Benchmark: the HTTP API of a real `allot server` under load (issue 8).

--clients concurrent clients (default 100; httpx async, one connection and one API token each) loop for
--duration seconds (default 300): submit a job (60 % of requests), list the newest jobs (20 %), poll one of their
own jobs (20 %). The server is a separate process (`python -m allotment.cli server`: engine + API, local
executor over examples/small's four virtual 8-GPU nodes, SQLite in a temporary directory or --database-url for
PostgreSQL). Jobs ask for 8 GPUs and sleep 20 s, so a few run and the rest wait: the engine cycles over a growing
queue while the API serves, as on a busy day.

Prints per operation: count, throughput, p50 and p99 latency, errors (any non-2xx or transport failure), and
the sustained submission rate. Targets (issue 8): ≥ 1,000 submissions/s, p99 < 50 ms for submissions, 0 errors.

Run: .venv/bin/python -m benchmarks.bench_load [--duration 300] [--clients 100] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
MEMBERS = [("pretrain", "ben"), ("finetune", "chen"), ("detection", "dana"), ("segmentation", "eli")]


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    samples: list[str] = field(default_factory=list)

    def record(self, op: str, seconds: float, ok: bool, detail: str = "") -> None:
        self.latencies[op].append(seconds)
        if not ok:
            self.errors[op] += 1
            if len(self.samples) < 5:
                self.samples.append(f"{op}: {detail[:200]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(database_url: str | None, data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [
        sys.executable, "-m", "allotment.cli", "server", "--config", str(SMALL), "--data-dir", str(data_dir),
        "--port", str(port), "--open-login", *(["--database-url", database_url] if database_url else []),
    ]  # fmt: skip
    log = (data_dir / "server.log").open("wb")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), ALLOT_LOG_FORMAT="json")
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the server did not start; see {data_dir / 'server.log'}")
        time.sleep(0.1)


async def client(n: int, url: str, token: str, budget: str, until: float, tally: Tally) -> None:
    rng = random.Random(n)
    mine: list[str] = []
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as http:
        while time.monotonic() < until:
            roll = rng.random()
            if roll < 0.6 or not mine:
                op = "submit"
                body = {"spec": {"budget": budget, "command": ["sleep", "20"], "resources": {"gpus": 8}}}
                t0 = time.perf_counter()
                try:
                    r = await http.post("/jobs", json=body)
                    ok = r.status_code == 201
                    if ok:
                        mine.append(r.json()["job"]["id"])
                    detail = f"{r.status_code} {r.text}"
                except httpx.HTTPError as exc:
                    ok, detail = False, repr(exc)
            elif roll < 0.8:
                op = "list"
                t0 = time.perf_counter()
                try:
                    r = await http.get("/jobs", params={"limit": 50})
                    ok, detail = r.status_code == 200, f"{r.status_code} {r.text}"
                except httpx.HTTPError as exc:
                    ok, detail = False, repr(exc)
            else:
                op = "poll"
                t0 = time.perf_counter()
                try:
                    r = await http.get(f"/jobs/{rng.choice(mine)}")
                    ok, detail = r.status_code == 200, f"{r.status_code} {r.text}"
                except httpx.HTTPError as exc:
                    ok, detail = False, repr(exc)
            tally.record(op, time.perf_counter() - t0, ok, detail)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(url: str, clients: int, duration: float) -> Tally:
    tokens = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        for n in range(clients):
            budget, user = MEMBERS[n % len(MEMBERS)]
            r = await http.post("/auth/login", json={"user": user, "name": f"load-{n}"})
            r.raise_for_status()
            tokens.append((r.json()["secret"], budget))
    tally = Tally()
    until = time.monotonic() + duration
    await asyncio.gather(*(client(n, url, t, b, until, tally) for n, (t, b) in enumerate(tokens)))
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load (default 300)")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (default: SQLite in a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="allot-load-") as tmp:
        proc, url = start_server(args.database_url, Path(tmp))
        try:
            started = time.monotonic()
            tally = asyncio.run(run(url, args.clients, args.duration))
            elapsed = time.monotonic() - started
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    backend = "PostgreSQL" if args.database_url else "SQLite"
    print(f"load: {args.clients} clients for {args.duration:.0f}s against a real server on {backend}")
    print(f"{'operation':<10}{'count':>9}{'per s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for op in ("submit", "list", "poll"):
        values = tally.latencies.get(op, [])
        if not values:
            continue
        print(
            f"{op:<10}{len(values):>9}{len(values) / elapsed:>9.1f}{1000 * statistics.median(values):>9.1f}"
            f"{1000 * quantile(values, 0.99):>9.1f}{tally.errors.get(op, 0):>8}"
        )
    errors = sum(tally.errors.values())
    print(f"errors: {errors}" + ("" if not tally.samples else "; e.g. " + " | ".join(tally.samples)))


if __name__ == "__main__":
    main()
