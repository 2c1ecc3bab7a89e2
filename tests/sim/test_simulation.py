"""Multi-round simulations through the real engine cycle and SQLite store: starts, preemptions with lost work,
idle sessions reclaimed, hardware faults drained, and the same seed giving the same result."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import ContractClass, JobKind
from allotment.sim import metrics
from allotment.sim.results import SimResult
from allotment.sim.runner import Faults, SimOptions, Simulation
from allotment.sim.synthetic import SyntheticSpec, generate
from allotment.sim.workload import SimJob, Workload
from tests.sim.builders import sim_job

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
H = 3600


def simulate(jobs: list[SimJob], horizon: int = 6 * H, **options: object) -> SimResult:
    workload = Workload("test", SMALL, tuple(jobs), horizon)
    return Simulation(workload, AllotmentPolicy(), SimOptions(**options)).run()  # type: ignore[arg-type]


def runs_of(result: SimResult, job_id: str) -> list[tuple[int, int | None, str | None, int]]:
    return [(r.start, r.end, r.preempt_reason, r.lost_work) for r in result.runs if r.job_id == job_id]


def test_a_budget_limit_makes_jobs_wait_for_the_next_round() -> None:
    # pretrain may hold 24 GPUs: three 8-GPU jobs start at once, the other two when the first ones finish.
    result = simulate([sim_job(f"j{i}") for i in range(5)])
    starts = sorted(j.first_start for j in result.jobs if j.first_start is not None)
    assert starts == [0, 0, 0, H, H]
    assert all(j.state == "completed" for j in result.jobs)
    assert [j.end for j in result.jobs] == [H, H, H, 2 * H, 2 * H]


def test_opportunistic_work_yields_and_loses_only_the_work_since_its_checkpoint() -> None:
    opp = sim_job(
        "opp",
        budget="finetune",
        user="chen",
        replicas=3,
        work=2 * H,
        contract=ContractClass.OPPORTUNISTIC,
        checkpoint=600,
    )
    guaranteed = sim_job("g", submit=1500, budget="detection", user="dana", replicas=3, work=H)
    result = simulate([opp, guaranteed])
    first, *rest = runs_of(result, "opp")
    assert first[:3] == (0, 1500, "for-guaranteed")
    assert first[3] == 300  # checkpoints at 600 and 1200 s kept 1,200 s of work
    [g] = runs_of(result, "g")
    assert g[0] == 1500 + 60  # the opportunistic job left at once; the next cycle, 120 s later, starts g
    assert rest and rest[-1][1] is not None and rest[-1][1] - rest[-1][0] == 2 * H - 1200
    m = metrics.compute(result)
    assert m.preemptions == 1
    assert m.gpu_hours_lost == 24 * 300 / H


def test_a_parked_session_is_reclaimed_after_its_idle_limit() -> None:
    parked = sim_job(
        "s",
        budget="finetune",
        user="chen",
        gpus=1,
        work=8 * H,
        kind=JobKind.SESSION,
        slice_seconds=8 * H,
        idle=((600, 8 * H),),
        checkpoint=None,
        cls="session",
    )
    result = simulate([parked], horizon=10 * H)
    [(start, end, reason, _lost)] = runs_of(result, "s")
    assert start == 0 and reason == "idle-session"
    assert end is not None and 600 + H <= end <= 600 + H + 900  # the small example's idle limit is 1 h


def test_drained_nodes_empty_within_the_longest_slice_and_grace() -> None:
    jobs = [
        sim_job(
            f"j{i}",
            submit=600 * i,
            budget=("pretrain", "detection")[i % 2],
            user=("ben", "dana")[i % 2],
            work=3 * H,
            slice_seconds=H,
        )
        for i in range(12)
    ]
    result = simulate(jobs, horizon=12 * H, faults=Faults(per_node_day=3, hard_fraction=0.0, repair=H))
    assert result.drains
    emptied = metrics.drain_empty_hours(result)
    assert any(hours > 0 for hours in emptied)  # some drained node was busy
    for hours in emptied:
        assert hours <= (8 * H + 5 * 60) / H  # promise 4 with the small example's max_slice 8 h, max_grace 5 min


def _synthetic(seed: int) -> SimResult:
    spec = SyntheticSpec(days=0.5, demand=2.0, drain_days=0.25)
    workload = generate(SMALL, spec, seed)
    workload = replace(workload, jobs=tuple(workload.jobs)[:40])
    return Simulation(workload, AllotmentPolicy(), SimOptions(seed=seed, resolution=120)).run()


def _comparable(r: SimResult) -> SimResult:
    return replace(r, wall_seconds=0.0, decide_seconds=0.0)


def test_the_same_seed_gives_the_same_result_and_another_seed_does_not() -> None:
    a, b = _synthetic(3), _synthetic(3)
    assert _comparable(a) == _comparable(b)
    assert metrics.compute(a) == metrics.compute(b)
    assert any(r.job_id.startswith("se") for r in a.runs)  # sessions ran
    assert _comparable(_synthetic(4)).jobs != _comparable(a).jobs


def test_a_session_over_its_users_limit_is_counted_apart_from_sessions_within_limits() -> None:
    def session(job_id: str, submit: int) -> SimJob:
        return sim_job(job_id, submit, budget="finetune", user="chen", gpus=1, work=H, kind=JobKind.SESSION,
                       slice_seconds=2 * H, checkpoint=None, cls="session")  # fmt: skip

    # the small example allows two sessions per user: the third waits for one of them to end, an hour later
    result = simulate([session("s1", 0), session("s2", 10), session("s3", 20)], horizon=4 * H)
    own = {j.id: j.own_limit for j in result.jobs}
    assert own == {"s1": False, "s2": False, "s3": True}
    m = metrics.compute(result)
    assert m.sessions_own_limit == 1
    assert m.session_latency.n == 2 and m.sessions_within_60s == 1.0
    s3 = next(j for j in result.jobs if j.id == "s3")
    assert s3.first_start is not None and s3.first_start - s3.submit >= H - 60  # it waited for s1 to end
    assert m.session_latency_all.n == 3


def test_the_first_estimated_start_is_kept_to_measure_how_far_off_it_was() -> None:
    # more hour-long 8-GPU jobs than the small fleet holds at once: the ones that wait are told an estimated start
    budgets = ("pretrain", "finetune", "detection", "segmentation")
    result = simulate([sim_job(f"j{i}", i, budget=budgets[i % 4], user=f"u{i}") for i in range(16)], horizon=8 * H)
    told = [j for j in result.jobs if j.first_eta is not None and j.first_start is not None]
    assert told, "no job was given an estimated start"
    assert all(j.first_eta is not None and j.first_eta >= j.submit for j in told)  # never an estimate in the past
    m = metrics.compute(result)
    errors = sorted(
        abs(j.first_start - j.first_eta) / H for j in told if j.first_start is not None and j.first_eta is not None
    )
    assert m.eta_error.n == len(told) and m.eta_error.p50 == metrics.quantile(errors, 0.5)
