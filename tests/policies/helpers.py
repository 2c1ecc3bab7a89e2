"""Small shared helpers for the baseline-policy tests: run a policy on a World and read its decisions by job."""

from __future__ import annotations

from dataclasses import dataclass

from allotment.core.decisions import Decisions
from allotment.core.model import RunClass
from allotment.policies import make_policy
from tests.core.builders import World


@dataclass(frozen=True)
class Outcome:
    """What one decide() did, by job id."""

    decisions: Decisions

    @property
    def started(self) -> dict[str, tuple[str, ...]]:
        """Started job → the nodes it was placed on."""
        return {s.job_id: tuple(a.node for a in s.placement) for s in self.decisions.starts}

    @property
    def run_classes(self) -> dict[str, RunClass]:
        return {s.job_id: s.run_class for s in self.decisions.starts}

    @property
    def preempted(self) -> dict[str, str]:
        """Preempted job → reason."""
        return {p.job_id: p.reason.value for p in self.decisions.preempts}

    @property
    def planned(self) -> dict[str, int]:
        """Job with a planned start → when."""
        return {r.job_id: r.planned_start for r in self.decisions.reserves}

    def blocker(self, job_id: str) -> str:
        return self.decisions.pending[job_id].blocker.value


def decide(policy: str, world: World, now: int = 100) -> Outcome:
    return Outcome(make_policy(policy).decide(world.snapshot(), now))
