"""Shared facts for the change-set rule tests: a tiny fleet, rules, builders of loaded facts, and the snapshot
loader both stores share run over that fleet (`loaded`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from allotment.changes.records import Accounting, JobFacts, OpenRun, Rules
from allotment.changes.snapshot import ActiveRow, Lookup, OpenRunRow, SnapshotCache, assemble
from allotment.core.jobstate import JobState
from allotment.core.model import Allocation, Budget, Cluster, Job, Node, PolicyConfig, RunClass, Snapshot
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


def loaded(
    active: Sequence[ActiveRow],
    keep: SnapshotCache,
    jobs: dict[str, Job] | Callable[[list[str], dict[str, Job]], None],
    *,
    open_runs: Iterable[OpenRunRow] = (),
    lookup: Lookup | None = None,
) -> Snapshot:
    """`changes.snapshot.assemble` at T0 over SNAP's fleet and one budget, `lab`, with no money, usage, windows or
    reservations: what the eligibility gate and the job cache do is all that varies. `jobs` are the jobs as
    submitted, or the `fill` callback that hands them out (to see what the loader asks for)."""
    fill = jobs if callable(jobs) else (lambda ids, cache: cache.update((i, jobs[i]) for i in ids))
    return assemble(
        T0, POLICY, RULES.rates, clusters=SNAP.clusters, nodes=SNAP.nodes, budgets=[Budget("lab", None, 0)],
        money={}, usage={}, open_runs=open_runs, active=active, fill=fill,
        placement_of=lambda _: (Allocation("n1", (0,)),), windows=(), reservations=(), keep=keep, lookup=lookup,
    )  # fmt: skip
