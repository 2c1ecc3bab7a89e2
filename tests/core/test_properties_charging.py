"""Promise 6: every GPU-second a job holds is charged exactly once, to exactly one budget (its own).

Checked with the Driver over many rounds, at rates where every whole second costs whole micro: no GPU is ever held by
two runs at once, and what the Driver charged each budget equals the sum, over the pieces of its jobs' runs read from
the decisions and the event log (start → lapse → finish or kill), of cost(GPUs, rate, price of the piece, length)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given

from allotment.core.decisions import Decisions
from allotment.core.model import Job, RunClass, Snapshot
from allotment.core.units import cost
from tests.core.strategies import CALM, DRIVEN, Case, CheckedDriver, cases, price_of, rate_on

HOURS = 6


@dataclass
class Piece:
    budget: str
    gpus: int
    rate: int
    price: int
    since: int


def no_gpu_held_twice(snap: Snapshot, now: int, d: Decisions) -> None:
    seen: dict[tuple[str, int], str] = {}
    for job in snap.jobs:
        if job.run is None:
            continue
        for a in job.run.placement:
            for g in a.gpus:
                assert (a.node, g) not in seen, f"GPU {a.node}:{g} held by {seen[(a.node, g)]} and {job.id}"
                seen[(a.node, g)] = job.id
    for s in d.starts:
        for a in s.placement:
            for g in a.gpus:
                assert (a.node, g) not in seen, f"{s.job_id} starts on {a.node}:{g}, held by {seen[(a.node, g)]}"
                seen[(a.node, g)] = s.job_id


def expected_charges(case: Case, drv: CheckedDriver) -> dict[str, int]:
    snap, pol = case.snapshot, case.snapshot.policy
    jobs: dict[str, Job] = {j.id: j for j in snap.jobs}
    open_: dict[str, Piece] = {}
    total: dict[str, int] = {}

    def close(job_id: str, at: int) -> None:
        p = open_.pop(job_id)
        total[p.budget] = total.get(p.budget, 0) + cost(p.gpus, p.rate, p.price, at - p.since)

    for j in snap.jobs:
        if j.run is not None:
            price = price_of(pol, j.run.run_class)
            open_[j.id] = Piece(j.budget, j.run.gpu_count, rate_on(snap, j.run.placement), price, case.now)
    ends = sorted((e.at, e.job) for e in drv.log if e.kind in ("finished", "killed"))
    for at, d in drv.rounds:
        while ends and ends[0][0] <= at:
            t, job_id = ends.pop(0)
            close(job_id, t)
        for lp in d.lapses:
            if lp.job_id not in open_:
                continue  # preempted with no grace in the same round: it ended at this instant
            piece = open_[lp.job_id]
            close(lp.job_id, at)
            open_[lp.job_id] = replace(piece, price=price_of(pol, RunClass.OPPORTUNISTIC), since=at)
        for s in d.starts:
            gpus = sum(len(a.gpus) for a in s.placement)
            job = jobs[s.job_id]
            open_[s.job_id] = Piece(job.budget, gpus, rate_on(snap, s.placement), price_of(pol, s.run_class), at)
    for t, job_id in ends:
        close(job_id, t)
    for job_id in list(open_):
        close(job_id, drv.now)
    return total


@DRIVEN
@given(cases(replace(CALM, exact_rates=True, max_pending=16)))
def test_every_gpu_second_is_charged_once_to_its_own_budget(case: Case) -> None:
    drv = CheckedDriver(case.snapshot, case.durations, case.now)
    drv.hooks.append(no_gpu_held_twice)
    drv.run_until(case.now + HOURS * 3600, every=600)
    expected = {b: v for b, v in expected_charges(case, drv).items() if v}
    assert {b: v for b, v in drv.spent.items() if v} == expected
