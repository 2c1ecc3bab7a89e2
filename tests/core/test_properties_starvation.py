"""Promise 8, no starvation: a pending job that gets a planned start (a reservation built from known slice ends, or
GPUs being freed by preemption) starts by it, and while nothing new arrives the planned start never moves later and
never vanishes. Checked with the Driver over many rounds; the Driver decides every few minutes (and at every finish,
kill and slice end), so a start may come up to one round after the instant planned."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import example, given, settings

from allotment.core.decisions import Decisions
from allotment.core.model import MICRO_PER_CREDIT, Account, ContractClass, Snapshot
from tests.core.builders import World
from tests.core.strategies import CALM, DRIVEN, Case, CheckedDriver, cases

ROUND = 300
"""Seconds between the Driver's rounds."""


@dataclass
class Plans:
    first: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Job → (when it first got a planned start, that planned start)."""
    broken: list[str] = field(default_factory=list)
    requeued_at: dict[str, int] = field(default_factory=dict)
    """Budget → when one of its jobs last came back to the queue (something new arrived)."""

    def see(self, snap: Snapshot, now: int, d: Decisions) -> None:
        jobs = {j.id: j for j in snap.jobs}
        for job_id in [j for j in self.first if j in jobs]:
            if self.requeued_at.get(jobs[job_id].budget, -1) >= self.first[job_id][0]:
                del self.first[job_id]
        planned = {r.job_id: r.planned_start for r in d.reserves}
        started = {s.job_id for s in d.starts}
        for job_id, (_, start) in self.first.items():
            if job_id not in jobs or jobs[job_id].run is not None or job_id in started:
                continue
            if job_id not in planned:
                self.broken.append(f"{job_id}: planned start {start} vanished at {now}")
            elif planned[job_id] > start + ROUND:
                self.broken.append(f"{job_id}: planned start {start} moved to {planned[job_id]} at {now}")
        for job_id, start in planned.items():
            self.first.setdefault(job_id, (now, start))

    def requeue(self, budget: str, at: int) -> None:
        self.requeued_at[budget] = at


class Tracked(CheckedDriver):
    def __init__(self, case: Case, plans: Plans) -> None:
        super().__init__(case.snapshot, case.durations, case.now)
        self.plans = plans
        self.hooks.append(plans.see)

    def _advance(self, to: int) -> None:
        seen = len(self.log)
        super()._advance(to)
        for e in self.log[seen:]:
            job = self.jobs.get(e.job)
            if e.kind == "killed" and job is not None:
                self.plans.requeue(job.budget, self.now)


def rich(case: Case) -> Case:
    accounts = {b: Account(10**6 * MICRO_PER_CREDIT, a.usage) for b, a in case.snapshot.accounts.items()}
    return replace(case, snapshot=replace(case.snapshot, accounts=accounts))


def _rebackfilled_victims() -> Case:
    """Two opportunistic jobs of blue (graces 60 s and 600 s) fill the only node; red's 8-GPU job preempts them. As
    the first victim leaves, opportunistic work is placed again on the GPUs being freed for red."""
    w = World().cluster("c1", nodes=1).budget("red", usage=100).budget("blue")
    w.pending("a", "blue", gpus=6, contract=ContractClass.OPPORTUNISTIC, grace=60, submitted_at=0)
    w.pending("b", "blue", gpus=2, contract=ContractClass.OPPORTUNISTIC, grace=600, submitted_at=0)
    w.pending("g", "red", gpus=8, submitted_at=0)
    return Case(w.snapshot(), 0, {})


@settings(DRIVEN)
@example(_rebackfilled_victims())
@given(cases(replace(CALM, sessions=False, max_pending=16, max_clusters=1, max_nodes=3)))
def test_a_planned_start_is_kept_and_never_slips(case: Case) -> None:
    case = rich(case)
    pol = case.snapshot.policy
    plans = Plans()
    drv = Tracked(case, plans)
    drv.run_until(case.now + pol.max_slice + pol.max_grace + 2 * ROUND, every=ROUND)
    assert not plans.broken
    for job_id, (planned_at, start) in plans.first.items():
        if start > drv.now - ROUND:
            continue
        began = [e.at for e in drv.log if e.job == job_id and e.kind == "start" and e.at >= planned_at]
        assert began, f"{job_id} planned at {start} never started (ran until {drv.now})"
        assert began[0] <= start + ROUND, f"{job_id} planned at {start} started only at {began[0]}"


def test_a_job_on_a_half_busy_node_gets_a_planned_start() -> None:
    w = World().cluster("c1", nodes=1).budget("red").budget("blue", usage=5000)
    w.running("s", "blue", {"c1-h100-00": 4}, started=0, slice_end=3600, grace=60)
    w.pending("big", "red", gpus=8, submitted_at=0)
    drv = CheckedDriver(w.snapshot(), {}, 0)
    d = drv.step(600)
    assert [(r.job_id, r.planned_start) for r in d.reserves] == [("big", 3660)]
