"""Pausing Python's cyclic garbage collector while a scheduling cycle runs.

Owns: `collector_paused()`, the context the engine runs each decide + apply transaction in (Engine.step).

Why: one cycle at Ai2 scale allocates hundreds of thousands of short-lived objects (cache keys, terms, reasons,
ORM rows) that reference counting frees at once. The cyclic collector, triggered by allocation counts, re-scans them
over and over, and its occasional full passes walk every long-lived object as well (the snapshot cache holds
~10,000 jobs). With decide() leaving no reference cycles as well, decide() alone at Ai2 scale with the compiled core
went from median 68 ms (p95 ~100 ms) to 56–58 ms (p95 57–66 ms) (docs/decisions/0041). Cyclic garbage made during
the cycle (by the store, say) is collected by the first collection after it.

Must not: be used from more than one thread at a time (the collector is process-wide: a pause ends when the
outermost one does) or around anything that waits on I/O for long (the pause would keep cyclic garbage alive).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; restore it afterwards if it was running before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
