"""The Slurm executor's durable memory: which Slurm job runs which (job_id, attempt), and what was reported.

Owns: one small SQLite file in the executor's state directory with a row per attempt: its Slurm job id, the
attempt the Slurm job was submitted as (a requeue keeps the Slurm job id and raises the attempt), the pinned nodes,
the GPUs Slurm reported, which events were already emitted, and the termination deadlines. A restarted Allotment
(a new executor on the same directory) finds its jobs and emits nothing twice.
Must not: talk to Slurm or decide anything.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    slurm_id INTEGER,
    base_attempt INTEGER NOT NULL,
    name TEXT NOT NULL,
    nodes TEXT NOT NULL,
    phase TEXT NOT NULL,
    gpus TEXT,
    started INTEGER NOT NULL DEFAULT 0,
    ended INTEGER NOT NULL DEFAULT 0,
    term_at INTEGER,
    kill_at INTEGER,
    kill_sent_at INTEGER,
    submitted_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX IF NOT EXISTS attempts_open ON attempts (ended);
"""

SUBMITTING = "submitting"
"""The row exists, sbatch may or may not have answered: find the job by name before submitting again."""
HELD = "held"
"""Submitted held; not yet pinned and released."""
RELEASED = "released"
"""Pinned to its nodes and released: Slurm starts it."""
REFUSED = "refused"
"""Never submitted: the job's owner has no Unix account to run it as (owner mode); poll reports it EXITED."""


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    job_id: str
    attempt: int
    slurm_id: int | None
    base_attempt: int
    """The attempt this Slurm job was submitted as; attempt - base_attempt is its expected restart count."""
    name: str
    nodes: tuple[str, ...]
    phase: str
    gpus: tuple[tuple[str, tuple[int, ...]], ...] | None
    """(node, GPU indices) as Slurm reported them once the attempt ran."""
    started: bool
    ended: bool
    term_at: int | None
    kill_at: int | None
    kill_sent_at: int | None
    submitted_at: int

    @property
    def expected_restarts(self) -> int:
        return self.attempt - self.base_attempt


class AttemptStore:
    """The attempts table. One writer (the executor); every method is its own transaction."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def get(self, job_id: str, attempt: int) -> AttemptRecord | None:
        row = self._db.execute("SELECT * FROM attempts WHERE job_id = ? AND attempt = ?", (job_id, attempt)).fetchone()
        return None if row is None else _record(row)

    def open_records(self) -> list[AttemptRecord]:
        rows = self._db.execute("SELECT * FROM attempts WHERE ended = 0 ORDER BY submitted_at, job_id, attempt")
        return [_record(r) for r in rows.fetchall()]

    def latest_for_job(self, job_id: str) -> AttemptRecord | None:
        row = self._db.execute(
            "SELECT * FROM attempts WHERE job_id = ? ORDER BY attempt DESC LIMIT 1", (job_id,)
        ).fetchone()
        return None if row is None else _record(row)

    def put(self, rec: AttemptRecord) -> None:
        gpus = None if rec.gpus is None else json.dumps([[n, list(ix)] for n, ix in rec.gpus])
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO attempts (job_id, attempt, slurm_id, base_attempt, name, nodes, phase,"
                " gpus, started, ended, term_at, kill_at, kill_sent_at, submitted_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rec.job_id,
                    rec.attempt,
                    rec.slurm_id,
                    rec.base_attempt,
                    rec.name,
                    json.dumps(list(rec.nodes)),
                    rec.phase,
                    gpus,
                    int(rec.started),
                    int(rec.ended),
                    rec.term_at,
                    rec.kill_at,
                    rec.kill_sent_at,
                    rec.submitted_at,
                ),
            )

    def update(self, rec: AttemptRecord, **changes: object) -> AttemptRecord:
        new = replace(rec, **changes)  # type: ignore[arg-type]
        self.put(new)
        return new

    def delete(self, job_id: str, attempt: int) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM attempts WHERE job_id = ? AND attempt = ?", (job_id, attempt))


def _record(row: tuple[object, ...]) -> AttemptRecord:
    (job_id, attempt, slurm_id, base, name, nodes, phase, gpus, started, ended, term_at, kill_at, kill_sent, sub) = row
    gpu_pairs = None
    if isinstance(gpus, str):
        gpu_pairs = tuple((str(n), tuple(int(i) for i in ix)) for n, ix in json.loads(gpus))
    return AttemptRecord(
        job_id=str(job_id),
        attempt=int(str(attempt)),
        slurm_id=None if slurm_id is None else int(str(slurm_id)),
        base_attempt=int(str(base)),
        name=str(name),
        nodes=tuple(str(n) for n in json.loads(str(nodes))),
        phase=str(phase),
        gpus=gpu_pairs,
        started=bool(started),
        ended=bool(ended),
        term_at=None if term_at is None else int(str(term_at)),
        kill_at=None if kill_at is None else int(str(kill_at)),
        kill_sent_at=None if kill_sent is None else int(str(kill_sent)),
        submitted_at=int(str(sub)),
    )
