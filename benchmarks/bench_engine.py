"""Benchmark: the engine's cycle end to end (load + decide + apply, one transaction) at Ai2 scale on SQLite and on
PostgreSQL, the ledger's write throughput, and the engine process's resident memory (issue 3).

Run: .venv/bin/python -m benchmarks.bench_engine [--cycles N] [--backends sqlite postgresql] [--dependent N]

The database holds the Ai2-like organisation (≈4,096 GPUs in 512 nodes, ~60 budgets) and the demo's sample workload:
~600 running jobs with open runs holding ~88 % of the GPUs and 10,000 pending jobs. Each measured cycle is the real
engine cycle (engine.cycle.cycle on SqlSchedulingStore) with the Allotment policy, run as Engine.step runs it (the
cyclic garbage collector paused), the clock advancing 5 s between cycles (steady state after the first one).
Targets: median cycle ≤ 200 ms; resident memory ≤ 500 MiB. `--dependent N` gives N of the pending jobs a dependency
(`afterok` on a running job, every tenth `afterok:…,singleton`), so they wait at the eligibility gate: what the
dependency rule costs the cycle's load (decision 64).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine, create_engine, insert, make_url, text

from allotment.cli.sample import default_now, sample_snapshot
from allotment.config import load_config, to_core
from allotment.core.cycle import AllotmentPolicy
from allotment.engine.collector import collector_paused
from allotment.engine.cycle import cycle as engine_cycle
from allotment.engine.setup import period_spec, seed
from allotment.ledger.charges import price_for, run_rate
from allotment.ledger.entries import Entry, EntryKind
from allotment.ledger.periods import Rollover
from allotment.store.accounts import post_all, posting_period
from allotment.store.db import make_engine, session_factory
from allotment.store.migrate import upgrade
from allotment.store.scheduling import Accounting, SqlSchedulingStore
from allotment.store.tables import JobEventRow, JobRow, RunRow, UserRow
from benchmarks.core_build import core_build

ROOT = Path(__file__).resolve().parents[1]
AI2 = ROOT / "examples" / "ai2" / "allotment.yaml"
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _database(backend: str, tmp: Path) -> tuple[Engine, Callable[[], None]]:
    if backend == "sqlite":
        return make_engine(f"sqlite:///{tmp / 'bench.db'}"), lambda: None
    admin = create_engine(PG, isolation_level="AUTOCOMMIT")
    schema = f"allot_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as c:
        c.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(PG).update_query_dict({"options": f"-csearch_path={schema}"})

    def drop() -> None:
        with admin.connect() as c:
            c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))

    return make_engine(url.render_as_string(hide_password=False)), drop


def _load(db: Engine, pending: int, dependent: int = 0) -> tuple[SqlSchedulingStore, int, int]:
    cfg = load_config(AI2)
    core = to_core(cfg)
    now = default_now(cfg)
    snap = sample_snapshot(cfg, seed=1, now=now, pending=pending)
    sessions = session_factory(db)
    seed(sessions, cfg, now - 3600)
    gpu_type = {n.name: n.gpu_type for n in snap.nodes}
    with sessions.begin() as s:
        known = {u for (u,) in s.execute(text("SELECT name FROM users"))}
        users = sorted({j.user for j in snap.jobs} - known)
        if users:
            s.execute(insert(UserRow), [{"name": u, "admin": False} for u in users])
        jobs: list[dict[str, object]] = []
        runs: list[dict[str, object]] = []
        events: list[dict[str, object]] = []
        for j in snap.jobs:
            jobs.append(
                {
                    "id": j.id,
                    "request_id": None,
                    "budget": j.budget,
                    "user": j.user,
                    "name": j.id,
                    "spec": {"command": ["sleep", "1"], "env": {}, "image": None, "workdir": None},
                    "gpus": j.gpus,
                    "replicas": j.replicas,
                    "kind": j.kind.value,
                    "contract": j.contract.value,
                    "slice_seconds": j.slice_seconds,
                    "priority": j.priority,
                    "grace": j.grace,
                    "max_runtime": j.max_runtime,
                    "gpu_types": list(j.gpu_types),
                    "clusters": list(j.clusters),
                    "fallback_opportunistic": j.fallback_opportunistic,
                    "requeue": j.requeue,
                    "submitted_at": j.submitted_at,
                    "state": "pending" if j.run is None else "running",
                    "attempt": 0 if j.run is None else 1,
                    "state_reason": "loaded",
                    "updated_at": now,
                    "cancel_requested_at": None,
                }
            )
            events.append(
                {"job_id": j.id, "at": j.submitted_at, "from_state": None, "to_state": "pending", "reason": "loaded"}
            )
            if j.run is not None:
                r = j.run
                rate = run_rate(((gpu_type[a.node], len(a.gpus)) for a in r.placement), core.rates)
                runs.append(
                    {
                        "id": f"{j.id}.0",
                        "job_id": j.id,
                        "attempt": 0,
                        "started_at": r.started_at,
                        "placement": [{"node": a.node, "gpus": list(a.gpus)} for a in r.placement],
                        "run_class": r.run_class.value,
                        "slice_end": r.slice_end,
                        "ended_at": None,
                        "exit_code": None,
                        "end_reason": None,
                        "rate_micro": rate,
                        "price": price_for(r.run_class, core.policy),
                        "price_since": r.started_at,
                        "charged_until": max(r.started_at, now - 60),
                        "signalled_at": None,
                        "kill_at": None,
                        "preempt_reason": None,
                        "preemptor": None,
                        "requeue": None,
                        "idle_since": r.idle_since,
                        "backfill_for": None,
                        "confirmed_at": r.started_at,
                    }
                )
        _depend(jobs, dependent)
        s.execute(insert(JobRow), jobs)
        s.execute(insert(JobEventRow), events)
        s.execute(insert(RunRow), runs)
    store = SqlSchedulingStore(
        sessions, core.policy, core.rates, Accounting(period_spec(cfg), Rollover(), charge_every=300)
    )
    return store, now, len(runs)


def _ledger_throughput(store: SqlSchedulingStore, now: int, n: int = 20_000) -> tuple[float, float]:
    budgets = [b.name for b in load_config(AI2).leaves()][:2]
    with store.sessions.begin() as s:
        period = posting_period(s, now)
    entries = [
        Entry(
            budgets[i % 2],
            EntryKind.ADJUSTMENT,
            -1 - i % 7,
            now,
            f"bench:{uuid.uuid4().hex}",
            period,
            None,
            None,
            "benchmark",
        )
        for i in range(n)
    ]
    t0 = time.perf_counter()
    for k in range(0, n, 500):
        with store.sessions.begin() as s:
            post_all(s, entries[k : k + 500])
    fresh = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for k in range(0, n, 500):
        with store.sessions.begin() as s:
            post_all(s, entries[k : k + 500])  # retries: every key already posted, nothing may be written twice
    retried = n / (time.perf_counter() - t0)
    return fresh, retried


def _depend(jobs: list[dict[str, object]], dependent: int) -> None:
    """Give `dependent` of the pending jobs a dependency on a running job (every tenth also singleton)."""
    running = [str(j["id"]) for j in jobs if j["state"] == "running"]
    waiting = [j for j in jobs if j["state"] == "pending"][:dependent]
    for n, j in enumerate(waiting):
        j["dependency"] = f"afterok:{running[n % len(running)]}" + (",singleton" if n % 10 == 0 else "")
    for j in jobs:
        j.setdefault("dependency", None)


def run(backend: str, cycles: int, pending: int, dependent: int = 0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db, drop = _database(backend, Path(tmp))
        try:
            upgrade(db)
            t0 = time.perf_counter()
            store, now, running = _load(db, pending, dependent)
            loaded = time.perf_counter() - t0
            policy = AllotmentPolicy()
            times, parts = [], []
            for i in range(cycles):
                t0 = time.perf_counter()
                with collector_paused():  # as Engine.step runs it
                    report = engine_cycle(store, policy.decide, now + 5 * i)
                times.append(time.perf_counter() - t0)
                parts.append(report.timings)
            steady = times[1:] or times

            def med(key: str) -> float:
                return statistics.median(p[key] for p in parts[1:] or parts) * 1000

            fresh, retried = _ledger_throughput(store, now + 5 * cycles)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"{backend}: {running} running runs, {pending:,} pending jobs ({dependent:,} with a dependency) "
                f"(loaded in {loaded:.1f} s; {core_build()})"
            )
            print(
                f"  first cycle {times[0] * 1000:.0f} ms; "
                f"steady cycles: median {statistics.median(steady) * 1000:.0f} ms, "
                f"max {max(steady) * 1000:.0f} ms over {len(steady)} (load {med('load'):.0f} + decide "
                f"{med('decide'):.0f} + apply {med('apply'):.0f} ms)"
            )
            print(f"  ledger: {fresh:,.0f} entries/s posted, {retried:,.0f} entries/s of idempotent retries")
            print(f"  peak resident memory of this process: {rss:.0f} MiB")
        finally:
            db.dispose()
            drop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cycles", type=int, default=11)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--backends", nargs="*", default=["sqlite", "postgresql"])
    ap.add_argument("--dependent", type=int, default=0, help="pending jobs with a dependency (decision 64)")
    args = ap.parse_args()
    for backend in args.backends:
        run(backend, args.cycles, args.pending, args.dependent)


if __name__ == "__main__":
    main()
