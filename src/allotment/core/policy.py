"""The Policy interface: one pure decide() per cycle, so any policy can run through the same engine.

Owns: the Policy Protocol. Must not: hold state between calls; everything a policy needs is in the snapshot.
"""

from __future__ import annotations

from typing import Protocol

from allotment.core.decisions import Decisions
from allotment.core.model import Seconds, Snapshot


class Policy(Protocol):
    name: str

    def decide(self, snapshot: Snapshot, now: Seconds) -> Decisions:
        """Decide what to start, preempt, renew and reserve, and why every other pending job waits."""
        ...
