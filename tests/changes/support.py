"""Shared facts for the change-set rule tests: a tiny fleet, rules, and builders of loaded facts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from allotment.changes.records import Accounting, JobFacts, OpenRun, Rules
from allotment.core.jobstate import JobState
from allotment.core.model import Cluster, Node, PolicyConfig, RunClass, Snapshot
from allotment.ledger.periods import Cadence, PeriodSpec

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z, a Thursday
H100 = 1_000_000
B200 = 1_600_000
PERIOD = "2026-01-01"
POLICY = PolicyConfig(max_grace=600, opportunistic_price=400, session_price=1000)
RULES = Rules(POLICY, {"h100": H100, "b200": B200}, Accounting(PeriodSpec(Cadence.MONTHLY, T0), charge_every=300))
SNAP = Snapshot(
    clusters=(Cluster("c"),),
    nodes=(Node("n1", "c", "h100", 8), Node("n2", "c", "b200", 8)),
    rates=RULES.rates,
    budgets=(),
    accounts={},
    jobs=(),
    policy=POLICY,
)


def job(job_id: str = "j1", state: JobState = JobState.RUNNING, **kw: Any) -> JobFacts:
    base = JobFacts(job_id, state, "lab", "ann", "batch", 60, 1, True, False, ("train",), {"A": "1"}, "/w", None)
    return replace(base, **kw)


def run(job_id: str = "j1", attempt: int = 0, **kw: Any) -> OpenRun:
    base = OpenRun(f"{job_id}.{attempt}", job_id, attempt, "lab", T0, RunClass.GUARANTEED, H100, 1000, T0, T0)
    return base._replace(**kw)
