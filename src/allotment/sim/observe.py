"""What the simulator learns from each cycle's decisions about jobs that wait (issue 21's honest measures).

Owns: the first estimated start each job was told when it was submitted (for the ETA error), and which sessions were
ever told they wait on their own limit (their user's session count or size, or their budget's GPU limit) — those
are reported apart, since no scheduler can start them sooner without breaking the limit.

Must not: change what the engine decides, or read the store; it reads only the Decisions each cycle returns.
"""

from __future__ import annotations

from collections.abc import Iterable

from allotment.core.decisions import Blocker, Decisions
from allotment.core.model import Seconds

OWN_LIMITS = frozenset({Blocker.SESSION_LIMIT, Blocker.LIMIT})


class WaitWatch:
    def __init__(self) -> None:
        self.first_eta: dict[str, Seconds] = {}
        """Job id → the estimated start in its first reason (jobs that started at once or got none are absent)."""
        self.own_limit: set[str] = set()
        """Sessions told at least once that they wait on their own limit."""
        self._new: list[str] = []
        self._sessions: set[str] = set()

    def submitted(self, job_ids: Iterable[str], sessions: Iterable[str]) -> None:
        """Jobs submitted at this instant, before the cycle that decides on them."""
        self._new.extend(job_ids)
        self._sessions.update(sessions)

    def saw(self, decisions: Decisions) -> None:
        """Read one cycle's decisions: the new jobs' first estimates, and the reasons of sessions still waiting."""
        pending = decisions.pending
        for jid in self._new:
            why = pending.get(jid)
            if why is not None and why.estimated_start is not None:
                self.first_eta[jid] = why.estimated_start
        self._new.clear()
        for s in decisions.starts:
            self._sessions.discard(s.job_id)
        for jid in self._sessions:
            why = pending.get(jid)
            if why is not None and why.blocker in OWN_LIMITS:
                self.own_limit.add(jid)
