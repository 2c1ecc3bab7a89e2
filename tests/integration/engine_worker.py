"""An Allotment engine process for the restart tests: build(Settings) on a data directory and run the engine loop
(reconcile, then cycles) until SIGTERM; the tests kill it with SIGKILL instead.

Run: python -m tests.integration.engine_worker CONFIG DATA_DIR EXECUTOR [SLURM_CONF]
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

from allotment.engine.setup import Settings, build


def main(config: str, data_dir: str, executor: str, slurm_conf: str | None) -> None:
    logging.basicConfig(level=logging.WARNING)
    settings = Settings(
        config=Path(config),
        data_dir=Path(data_dir),
        executor=executor,
        slurm_conf=Path(slurm_conf) if slurm_conf else None,
        fleet_sync_every=1,
    )
    built = build(settings)
    stop, wake = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    built.engine.run(stop, wake, interval=1.0, poll=0.2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
