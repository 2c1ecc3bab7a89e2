"""The job every side-by-side run executes: a sleep that does `work` seconds of "training", checkpoints its progress
every `--every` seconds and at once on SIGTERM, and resumes from its checkpoint when it runs again.

Owns: one job directory — `progress` (the last checkpoint, in seconds of work done), `events.jsonl` (one line per
start, preemption notice and completion) and `beat` (the time, progress and last checkpoint of the last second,
overwritten; a start records the beat it found, so a segment killed without notice still tells what it lost).
Only the first task of a gang (SLURM_PROCID 0) writes; every task keeps the same time so all end together.
Must not: import anything outside the standard library (it starts dozens of times per run, inside Slurm jobs), or
decide anything about scheduling. With `--self-requeue` (Slurm deciding) it asks Slurm to requeue its own job on
SIGTERM, the usual pattern for preemptible batch scripts (a job that exits during its grace is otherwise not
requeued).

Run: python worker.py JOBDIR WORK_SECONDS [--every SECONDS] [--self-requeue]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from types import FrameType

TICK = 0.2


def _append(path: Path, record: dict[str, object]) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class Stop(Exception):
    """SIGTERM arrived: checkpoint and leave."""


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise Stop


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("jobdir", type=Path)
    ap.add_argument("work", type=float)
    ap.add_argument("--every", type=float, default=10.0)
    ap.add_argument("--self-requeue", action="store_true")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _on_term)
    lead = os.environ.get("SLURM_PROCID", "0") == "0"
    jobdir: Path = args.jobdir
    progress_file, events, beat = jobdir / "progress", jobdir / "events.jsonl", jobdir / "beat"
    saved = float(progress_file.read_text()) if progress_file.exists() else 0.0
    prev_beat = json.loads(beat.read_text()) if beat.exists() else None
    start = time.time()
    if lead:
        _append(
            events,
            {
                "ev": "start",
                "t": start,
                "saved": saved,
                "nodes": os.environ.get("SLURM_JOB_NODELIST", ""),
                "slurm_job": os.environ.get("SLURM_JOB_ID", ""),
                "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0),
                "prev_beat": prev_beat,
            },
        )
    ckpt, last_ckpt, last_beat = saved, start, 0.0
    try:
        while True:
            now = time.time()
            done = saved + (now - start)
            if done >= args.work:
                if lead:
                    _write(progress_file, f"{args.work:.3f}")
                    _append(events, {"ev": "done", "t": now})
                return 0
            if lead and now - last_ckpt >= args.every:
                _write(progress_file, f"{done:.3f}")
                ckpt, last_ckpt = done, now
            if lead and now - last_beat >= 1.0:
                _write(beat, json.dumps({"t": now, "done": done, "saved": ckpt}))
                last_beat = now
            time.sleep(min(TICK, args.work - done))
    except Stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        now = time.time()
        done = min(args.work, saved + (now - start))
        if lead:
            _write(progress_file, f"{done:.3f}")
            _append(events, {"ev": "term", "t": now, "done": done})
            if args.self_requeue and os.environ.get("SLURM_JOB_ID"):
                subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], check=False, timeout=30)
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
