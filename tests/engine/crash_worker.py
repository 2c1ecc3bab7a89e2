"""The full server the crash test kills: the real server process structure (engine loop under leader election,
observed store, HTTP API on a fixed port) on a real database, with the simulated executor made durable by
replaying the delivered intents from the database at start-up (so a killed and restarted server finds the
"processes" it launched), on a clock running `factor` times faster than the wall.

Run: python -m tests.engine.crash_worker DATABASE_URL CONFIG FACTOR PORT DATA_DIR
"""

from __future__ import annotations

import hashlib
import logging
import signal
import sys
from pathlib import Path

from sqlalchemy import select

from allotment.api.serve import attach_api
from allotment.config import load_config, to_core
from allotment.core.cycle import AllotmentPolicy
from allotment.engine.clock import ScaledClock
from allotment.engine.cycle import Engine
from allotment.engine.server import Server
from allotment.engine.setup import Built, Settings, period_spec
from allotment.executors.simulated import Outcome, SimulatedExecutor
from allotment.ledger.periods import Rollover
from allotment.ops.leader import leadership_for
from allotment.ports.executor import LaunchSpec
from allotment.store.db import make_engine, reading, session_factory
from allotment.store.records import get_state
from allotment.store.scheduling import Accounting, SqlSchedulingStore, intent_of
from allotment.store.tables import IntentRow


def duration_of(job_id: str) -> int:
    """Each job's work in engine seconds, fixed by its id (10–100 s)."""
    return 10 + int(hashlib.sha256(job_id.encode()).hexdigest()[:6], 16) % 91


def outcome(spec: LaunchSpec) -> Outcome:
    return Outcome(duration=duration_of(spec.job_id), exit_code=0, sigterm_exit_after=0)


def main(url: str, config: str, factor: float, port: int, data_dir: Path) -> None:
    logging.basicConfig(level=logging.WARNING)
    cfg = load_config(Path(config))
    core = to_core(cfg)
    sessions = session_factory(make_engine(url))
    with reading(sessions) as s:
        origin = get_state(s, "clock_origin")
        intents = [
            intent_of(r)
            for r in s.scalars(
                select(IntentRow)
                .where(IntentRow.delivered_at.is_not(None))
                .order_by(IntentRow.delivered_at, IntentRow.id)
            )
        ]
        delivered = {r.id: r.delivered_at for r in s.scalars(select(IntentRow))}
    clock = ScaledClock(factor, int(origin["engine"]), float(origin["wall"]))
    executor = SimulatedExecutor(outcome, now=int(origin["engine"]))
    for intent in intents:  # replay what the killed engine handed over, at the times it did
        executor.advance_to(max(executor.now, int(delivered[intent.id] or executor.now)))
        if intent.spec is not None:
            executor.launch(intent.spec)
        else:
            executor.terminate(intent.job_id, intent.attempt, intent.grace)
    # events of runs the killed engine already closed are ignored when recorded again; the rest are news to it
    executor.follow(clock.now)
    store = SqlSchedulingStore(
        sessions, core.policy, core.rates, Accounting(period_spec(cfg), Rollover(), charge_every=300)
    )
    engine = Engine(store, executor, clock, AllotmentPolicy())
    server = Server(
        Built(engine, store, sessions, cfg), interval=20, poll=0.01, min_gap=0.05, leadership=leadership_for(url)
    )
    signal.signal(signal.SIGTERM, lambda *_: server.stop.set())
    server.start()
    settings = Settings(config=Path(config), data_dir=data_dir, submit_rate=0)
    attach_api(server, "127.0.0.1", port, settings=settings)
    server.stop.wait()
    server.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
