"""Crash safety of the full server: a real server process (engine under leader election + HTTP API) is killed with
SIGKILL at random points while clients submit a 1,000-job workload through the API, and restarted, ten times over
(8 rounds on SQLite, 2 on PostgreSQL). Clients retry a submission that got no answer with the same
Idempotency-Key, as the SDK does. Afterwards every accepted submission exists exactly once and nothing else does,
no job is lost, no charge is missing or doubled, and every job's history is consistent (issues 3 and 8)."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from allotment.config import load_config
from allotment.core.units import cost
from allotment.engine.setup import seed
from allotment.ledger.entries import EntryKind
from allotment.service.context import Context
from allotment.service.tokens import issue
from allotment.store.accounts import balances, spending, summed_balances, summed_spending
from allotment.store.db import make_engine, reading, session_factory
from allotment.store.migrate import upgrade
from allotment.store.records import get_state, set_state
from allotment.store.tables import IntentRow, JobEventRow, JobRow, LedgerEntryRow, PeriodRow, RunRow
from tests.databases import postgres_engine
from tests.engine.rig import ROOT, SMALL, T0
from tests.ops.servers import free_port

JOBS = 1000
FACTOR = 500.0  # engine seconds per wall second
ROUNDS = 10
KILLS = 4
BUDGETS = [("pretrain", "ben"), ("finetune", "chen"), ("detection", "dana"), ("segmentation", "eli")]


def _populate(db: Engine) -> dict[str, str]:
    """Seed the organisation and the clock; returns an API token per submitting user."""
    sessions = session_factory(db)
    seed(sessions, load_config(SMALL), T0)
    with sessions.begin() as s:
        set_state(s, "clock_origin", {"engine": T0 + 7200, "wall": time.time()})
    ctx = Context(sessions=sessions, config=load_config(SMALL), data_dir=Path("."), now=lambda: T0 + 7200)
    return {user: issue(ctx, user, ttl=30 * 24 * 3600).secret for _, user in BUDGETS}


def _workload(seed_no: int) -> list[tuple[str, dict[str, Any]]]:
    """JOBS (user, spec) pairs, the same for a round number."""
    rng = random.Random(seed_no)
    out = []
    for i in range(JOBS):
        budget, user = rng.choice(BUDGETS)
        contract = "opportunistic" if rng.random() < 0.2 else "guaranteed"
        spec = {
            "budget": budget,
            "command": ["work", str(i)],
            "resources": {"gpus": rng.choice([1, 1, 2, 4, 8])},
            "contract": {
                "class": contract,
                **({"slice": rng.choice([1800, 3600])} if contract == "guaranteed" else {}),
            },
            "grace": rng.choice([0, 10, 30]),
            "priority": rng.randint(0, 3),
        }
        out.append((user, spec))
    return out


class Clients:
    """Clients submitting the workload through the API, eight at a time; a request without an answer (the server
    died, or is starting) is retried with the same Idempotency-Key until the server answers 200 or 201."""

    def __init__(self, url: str, tokens: dict[str, str], workload: list[tuple[str, dict[str, Any]]]) -> None:
        self.url, self.tokens, self.workload = url, tokens, workload
        self.accepted: dict[str, str] = {}
        self.errors: list[str] = []
        self.started = False
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._submit, args=(k,), daemon=True) for k in range(8)]

    def start(self) -> None:
        self.started = True
        for t in self._threads:
            t.start()

    def done(self) -> bool:
        return self.started and not any(t.is_alive() for t in self._threads)

    def _submit(self, shard: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            for i in range(shard, len(self.workload), len(self._threads)):
                user, spec = self.workload[i]
                key = f"crash-{i:04d}"
                while True:
                    try:
                        response = client.post(
                            "/jobs",
                            json={"spec": spec},
                            headers={"Authorization": f"Bearer {self.tokens[user]}", "Idempotency-Key": key},
                        )
                    except httpx.HTTPError:
                        time.sleep(0.02)
                        continue
                    if response.status_code in (200, 201):
                        with self._lock:
                            self.accepted[key] = response.json()["job"]["id"]
                        break
                    if response.status_code != 503:
                        self.errors.append(f"{key}: {response.status_code} {response.text[:300]}")
                        return
                    time.sleep(0.02)


def _worker(url: str, port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.engine.crash_worker", url, str(SMALL), str(FACTOR), str(port), str(data_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finished(db: Engine) -> bool:
    with reading(session_factory(db)) as s:
        left = s.scalar(
            select(func.count())
            .select_from(JobRow)
            .where(JobRow.state.not_in(["completed", "failed", "cancelled", "lost"]))
        )
    return left == 0


def _last_cycle(db: Engine) -> int | None:
    with reading(session_factory(db)) as s:
        value = get_state(s, "last_cycle")
    return None if value is None else int(value)


def _run_with_kills(db: Engine, url: str, rng: random.Random, clients: Clients, data_dir: Path) -> int:
    """Start the server and SIGKILL it at a random moment while the clients submit (after it accepted a random
    20–150 more submissions); KILLS times; then let the last one take the rest and finish the workload."""
    kills = 0
    port = int(clients.url.rsplit(":", 1)[1])
    deadline = time.monotonic() + 300
    clients.start()
    while not (clients.done() and _finished(db)):
        assert time.monotonic() < deadline, "the workload did not finish in time"
        proc = _worker(url, port, data_dir)
        before = _last_cycle(db)
        while _last_cycle(db) == before and proc.poll() is None:  # wait for its first cycle
            assert time.monotonic() < deadline, "the server process never completed a cycle"
            time.sleep(0.02)
        accepted, more = len(clients.accepted), rng.randint(20, 150)
        end = time.monotonic() + (rng.uniform(0.0, 0.3) if kills < KILLS else 600)
        while proc.poll() is None and not (clients.done() and _finished(db)):
            if kills < KILLS and len(clients.accepted) < min(JOBS, accepted + more) and not clients.done():
                end = time.monotonic() + rng.uniform(0.0, 0.3)
            elif time.monotonic() >= end:
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"the server process died by itself:\n{err[-3000:]}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    assert not clients.errors, clients.errors[:5]
    return kills


def _check(db: Engine, accepted: dict[str, str]) -> None:
    with reading(session_factory(db)) as s:
        jobs = {j.id: j for j in s.scalars(select(JobRow))}
        keys = {j.request_id: j.id for j in jobs.values()}
        runs = defaultdict(list)
        for r in s.scalars(select(RunRow).order_by(RunRow.job_id, RunRow.attempt)):
            runs[r.job_id].append(r)
        events = defaultdict(list)
        for e in s.scalars(select(JobEventRow).order_by(JobEventRow.id)):
            events[e.job_id].append(e)
        charges: defaultdict[str | None, int] = defaultdict(int)
        for run_id, amount in s.execute(
            select(LedgerEntryRow.run_id, LedgerEntryRow.amount_micro).where(
                LedgerEntryRow.kind == EntryKind.CHARGE.value
            )
        ):
            charges[run_id] -= amount
        periods = list(s.scalars(select(PeriodRow.id)))
        kept = {p: (balances(s, p), spending(s, p)) for p in periods}
        summed = {p: (summed_balances(s, p), summed_spending(s, p)) for p in periods}
        launches = s.execute(
            select(IntentRow.job_id, IntentRow.attempt, func.count())
            .where(IntentRow.kind == "launch")
            .group_by(IntentRow.job_id, IntentRow.attempt)
        ).all()

    # no job lost or duplicated: every accepted submission exists exactly once, nothing else exists, all completed
    assert len(accepted) == JOBS
    assert len(jobs) == JOBS
    assert set(accepted.values()) == set(jobs)
    assert keys == {f"{jobs[job_id].user}:{key}": job_id for key, job_id in accepted.items()}
    assert {j.state for j in jobs.values()} == {"completed"}
    # every run launched exactly once, attempts contiguous, only the last one finishing the work
    assert all(n == 1 for _, _, n in launches)
    gpu_use: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for job_id, rs in runs.items():
        assert [r.attempt for r in rs] == list(range(len(rs))), job_id
        assert all(r.ended_at is not None for r in rs)
        assert rs[-1].exit_code == 0 and rs[-1].preempt_reason is None
        assert all(r.preempt_reason is not None or r.end_reason == "node lost" for r in rs[:-1]), job_id
        for a, b in itertools.pairwise(rs):
            assert a.ended_at is not None and a.ended_at <= b.started_at, job_id
        for r in rs:
            assert r.ended_at is not None
            for alloc in r.placement:
                for g in alloc["gpus"]:
                    gpu_use[(alloc["node"], g)].append((r.started_at, r.ended_at))
    # no GPU was ever handed to two runs at once
    for key, spans in gpu_use.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, key
    # no charge missing or doubled: each run's charges equal the cost of the time it held its GPUs
    for job_id, rs in runs.items():
        for r in rs:
            assert r.ended_at is not None
            if r.price_since > r.started_at:
                expected = cost(1, r.rate_micro, 1000, r.price_since - r.started_at) + cost(
                    1, r.rate_micro, r.price, r.ended_at - r.price_since
                )
            else:
                expected = cost(1, r.rate_micro, r.price, r.ended_at - r.started_at)
            assert charges[r.id] == expected, (job_id, r.attempt)
    # the running balances moved with exactly the entries that were committed, however the server was killed
    assert kept == summed
    # every history is a consistent chain from submission to completion, one start per run
    for job_id, evs in events.items():
        assert evs[0].from_state is None and evs[0].to_state == "pending"
        assert all(a.to_state == b.from_state for a, b in itertools.pairwise(evs)), job_id
        assert evs[-1].to_state == "completed"
        assert sum(1 for e in evs if e.to_state == "running") == len(runs[job_id])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "round_no"),
    [*(("sqlite", n) for n in range(ROUNDS - 2)), *(("postgresql", n) for n in range(ROUNDS - 2, ROUNDS))],
)
def test_sigkill_at_random_points_loses_and_doubles_nothing(tmp_path: Path, backend: str, round_no: int) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'allotment.db'}"
        _round(make_engine(url), url, round_no, tmp_path)
        return
    for db in postgres_engine():
        _round(db, db.url.render_as_string(hide_password=False), round_no, tmp_path)


def _round(db: Engine, url: str, round_no: int, data_dir: Path) -> None:
    upgrade(db)
    tokens = _populate(db)
    clients = Clients(f"http://127.0.0.1:{free_port()}", tokens, _workload(round_no))
    kills = _run_with_kills(db, url, random.Random(1000 + round_no), clients, data_dir)
    assert kills >= KILLS  # the workload outlived that many server processes killed mid-flight
    _check(db, clients.accepted)
