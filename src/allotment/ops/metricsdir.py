"""The folder where the engine process and its API worker processes keep their Prometheus values, so /metrics,
answered by any worker, counts every process's cycles, starts and requests (prometheus_client's multiprocess mode).

Owns: `share_metrics`, which empties `data_dir/metrics` (0700) and names it in $PROMETHEUS_MULTIPROC_DIR; the
variable must be set before prometheus_client is first imported, so this module imports nothing of it.

Must not: define metrics (ops.metrics does) or import anything that imports prometheus_client.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ENV = "PROMETHEUS_MULTIPROC_DIR"


def share_metrics(data_dir: Path) -> Path:
    """Start an empty shared metrics folder under `data_dir` for this server and the workers it spawns."""
    if "prometheus_client" in sys.modules:
        raise RuntimeError("share_metrics must run before prometheus_client is imported")
    folder = data_dir.resolve() / "metrics"
    shutil.rmtree(folder, ignore_errors=True)  # values of an earlier run would be summed in
    folder.mkdir(parents=True, mode=0o700)
    os.environ[ENV] = str(folder)
    return folder
