"""Crash safety: a real engine process is killed with SIGKILL at random points during a 1,000-job workload and
restarted, ten times over; afterwards no job is lost or duplicated, no charge is missing or doubled, and every
job's history is consistent (issue 3)."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from allotment.config import load_config
from allotment.core.model import ContractClass
from allotment.core.units import cost
from allotment.engine.setup import seed
from allotment.ledger.entries import EntryKind
from allotment.store.db import make_engine, reading, session_factory
from allotment.store.jobs import Submission, submit
from allotment.store.migrate import upgrade
from allotment.store.records import get_state, set_state
from allotment.store.tables import IntentRow, JobEventRow, JobRow, LedgerEntryRow, RunRow
from tests.databases import postgres_engine
from tests.engine.rig import ROOT, SMALL, T0

JOBS = 1000
FACTOR = 500.0  # engine seconds per wall second
ROUNDS = 10
KILLS = 4
BUDGETS = [("pretrain", "ben"), ("finetune", "chen"), ("detection", "dana"), ("segmentation", "eli")]


def _populate(db: Engine, seed_no: int) -> None:
    rng = random.Random(seed_no)
    sessions = session_factory(db)
    seed(sessions, load_config(SMALL), T0)
    with sessions.begin() as s:
        set_state(s, "clock_origin", {"engine": T0 + 7200, "wall": time.time()})
        for i in range(JOBS):
            budget, user = rng.choice(BUDGETS)
            submit(
                s,
                Submission(
                    budget=budget,
                    user=user,
                    command=["work", str(i)],
                    gpus=rng.choice([1, 1, 2, 4, 8]),
                    job_id=f"job{i:04d}",
                    slice_seconds=rng.choice([1800, 3600]),
                    grace=rng.choice([0, 10, 30]),
                    contract=ContractClass.OPPORTUNISTIC if rng.random() < 0.2 else ContractClass.GUARANTEED,
                    priority=rng.randint(0, 3),
                ),
                T0 + 7200,
            )


def _worker(url: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.engine.crash_worker", url, str(SMALL), str(FACTOR)],
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


def _run_with_kills(db: Engine, url: str, rng: random.Random) -> int:
    """Start the engine, let it get going, SIGKILL it at a random moment; KILLS times; then let the last one finish
    the workload."""
    kills = 0
    deadline = time.monotonic() + 300
    while not _finished(db):
        assert time.monotonic() < deadline, "the workload did not finish in time"
        proc = _worker(url)
        before = _last_cycle(db)
        while _last_cycle(db) == before and proc.poll() is None:  # wait for its first cycle
            assert time.monotonic() < deadline, "the engine process never completed a cycle"
            time.sleep(0.02)
        end = time.monotonic() + (rng.uniform(0.05, 1.5) if kills < KILLS else 600)
        while time.monotonic() < end and proc.poll() is None and not _finished(db):
            time.sleep(0.02)
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"the engine process died by itself:\n{err[-3000:]}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    return kills


def _check(db: Engine) -> None:
    with reading(session_factory(db)) as s:
        jobs = {j.id: j for j in s.scalars(select(JobRow))}
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
        launches = s.execute(
            select(IntentRow.job_id, IntentRow.attempt, func.count())
            .where(IntentRow.kind == "launch")
            .group_by(IntentRow.job_id, IntentRow.attempt)
        ).all()

    # no job lost or duplicated: every submitted job exists once and ran to completion
    assert len(jobs) == JOBS
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
        _round(make_engine(url), url, round_no)
        return
    for db in postgres_engine():
        _round(db, db.url.render_as_string(hide_password=False), round_no)


def _round(db: Engine, url: str, round_no: int) -> None:
    upgrade(db)
    _populate(db, round_no)
    kills = _run_with_kills(db, url, random.Random(1000 + round_no))
    assert kills >= KILLS  # the workload outlived that many engine processes killed mid-flight
    _check(db)
