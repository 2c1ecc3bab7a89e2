"""Where the browser tests (and benchmarks/bench_web.py) find Debian's Chromium and how they start it.

The flags keep Chromium off the network (these machines have none: without them it retries Google's hosts) and
off the GPU; /work/shared/notes/browser-tests.md has the measurements behind them.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = Path(os.environ.get("ALLOT_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
