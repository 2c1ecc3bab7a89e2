"""Promise 3: user-set priority orders jobs within one budget only. Renumbering a budget's priorities without changing
their order changes no decision at all; when a budget's pending jobs all have the same shape, reshuffling its
priorities changes nothing about any other budget's jobs."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from allotment.core.decisions import Decisions
from allotment.core.model import ContractClass, Job, JobKind, Reservation, ReservationKind
from tests.core.builders import World
from tests.core.strategies import PROPERTY, Case, Draw, cases, decide, with_jobs


@st.composite
def renumbered(draw: Draw) -> tuple[Case, Case]:
    """A case, and the same case with one budget's priorities mapped through a strictly increasing function."""
    case = draw(cases())
    budget = draw(st.sampled_from(case.leaves()))
    old = sorted({j.priority for j in case.snapshot.jobs if j.budget == budget})
    new = sorted(draw(st.lists(st.integers(-1000, 1000), min_size=len(old), max_size=len(old), unique=True)))
    mapping = dict(zip(old, new, strict=True))
    jobs = [replace(j, priority=mapping[j.priority]) if j.budget == budget else j for j in case.snapshot.jobs]
    return case, with_jobs(case, jobs)


@PROPERTY
@given(renumbered())
def test_order_preserving_priorities_change_no_decision(pair: tuple[Case, Case]) -> None:
    before, after = pair
    assert decide(before) == decide(after)


def _same_shape(case: Case, budget: str, keep_reservations: bool) -> Case:
    """Every pending job of `budget` takes the shape of its first one (a batch job of one user)."""
    mine = [j for j in case.snapshot.jobs if j.budget == budget and j.run is None]
    model = next((j for j in mine if j.kind is JobKind.BATCH), None)
    jobs: list[Job] = []
    for j in case.snapshot.jobs:
        if j.budget == budget and j.run is None and model is not None:
            jobs.append(replace(model, id=j.id, priority=j.priority, submitted_at=j.submitted_at))
        else:
            jobs.append(j)
    out = with_jobs(case, jobs)
    if not keep_reservations:
        ids = {j.id for j in mine}
        kept = tuple(r for r in case.snapshot.reservations if r.job_id not in ids)
        out = replace(out, snapshot=replace(out.snapshot, reservations=kept))
    return out


@st.composite
def reshuffled(draw: Draw, keep_reservations: bool) -> tuple[Case, Case, str]:
    case = draw(cases())
    budget = draw(st.sampled_from(case.leaves()))
    case = _same_shape(case, budget, keep_reservations)
    mine = [j for j in case.snapshot.jobs if j.budget == budget and j.run is None]
    priorities = draw(st.permutations([j.priority for j in mine]))
    new = dict(zip((j.id for j in mine), priorities, strict=True))
    jobs = [replace(j, priority=new[j.id]) if j.id in new else j for j in case.snapshot.jobs]
    return case, with_jobs(case, jobs), budget


def about_others(case: Case, d: Decisions, budget: str) -> dict[str, object]:
    """Every decision about jobs of budgets other than `budget` (a job of `budget` named in them, as preemptor, as
    the plan a backfilled job was placed around, or as a running job that gave way to a plan, is named by its budget:
    its jobs are interchangeable, and which of them goes first is that budget's own priority)."""
    owner = {j.id: j.budget for j in case.snapshot.jobs}

    def other(job_id: str) -> bool:
        return owner[job_id] != budget

    def who(job_id: str | None) -> str | None:
        return f"budget {budget}" if job_id is not None and owner.get(job_id) == budget else job_id

    return {
        "starts": sorted(
            (replace(s, backfill_for=who(s.backfill_for)) for s in d.starts if other(s.job_id)),
            key=lambda s: s.job_id,
        ),
        "preempts": sorted(
            (p.job_id, p.reason, p.grace, p.requeue, who(p.preemptor)) for p in d.preempts if other(p.job_id)
        ),
        "renews": sorted((r for r in d.renews if other(r.job_id)), key=lambda r: r.job_id),
        "lapses": sorted((lp for lp in d.lapses if other(lp.job_id)), key=lambda lp: lp.job_id),
        "reserves": sorted(
            (
                (r.job_id, r.nodes, r.planned_start, r.kind, r.since, sorted(str(who(g)) for g in r.gave_way))
                for r in d.reserves
                if other(r.job_id)
            ),
            key=lambda r: r[0],
        ),
        "pending": {k: v for k, v in d.pending.items() if other(k)},
        "standings": {k: v for k, v in d.standings.items() if k != budget},
    }


@PROPERTY
@given(reshuffled(keep_reservations=False))
def test_reshuffled_priorities_change_nothing_for_other_budgets(triple: tuple[Case, Case, str]) -> None:
    before, after, budget = triple
    assert about_others(before, decide(before), budget) == about_others(after, decide(after), budget)


def _carried_plan_of_a_swapped_head() -> tuple[Case, Case, str]:
    """red's first job holds a planned start carried from the last cycle on the only node; green's session waits.
    red's user swaps the priorities of its two same-shape jobs."""
    w = World().cluster("c1", nodes=1).budget("red").budget("blue").budget("green")
    w.running("x", "blue", {"c1-h100-00": 8}, started=0, slice_end=30, leaving_until=120)
    w.pending("r1", "red", gpus=1, priority=1, submitted_at=0)
    w.pending("r2", "red", gpus=1, priority=0, submitted_at=0)
    w.session("s", "green", gpus=1, submitted_at=0)
    w.reserve(Reservation("r1", (("c1-h100-00", 1),), 120, ReservationKind.PLANNED))
    before = Case(w.snapshot(), 60, {})
    swapped = [replace(j, priority=1 - j.priority) if j.budget == "red" else j for j in before.snapshot.jobs]
    return before, with_jobs(before, swapped), "red"


def _plan_over_a_head_started_this_cycle() -> tuple[Case, Case, str]:
    """bravo (below its share) starts its first opportunistic job this cycle; alpha's next job plans over the node,
    and the job of bravo's that gives way to that plan is whichever bravo put first. bravo swaps its priorities."""
    opp = ContractClass.OPPORTUNISTIC
    w = World().cluster("c1", nodes=1).budget("alpha").budget("bravo")
    w.session("s", "alpha", gpus=1, submitted_at=0)
    w.pending("a", "alpha", gpus=4, submitted_at=0, slice_seconds=600)
    w.pending("b1", "bravo", gpus=4, priority=1, submitted_at=0, contract=opp)
    w.pending("b2", "bravo", gpus=4, priority=0, submitted_at=0, contract=opp)
    before = Case(w.snapshot(), 60, {})
    swapped = [replace(j, priority=1 - j.priority) if j.budget == "bravo" else j for j in before.snapshot.jobs]
    return before, with_jobs(before, swapped), "bravo"


@PROPERTY
@example(_carried_plan_of_a_swapped_head())
@example(_plan_over_a_head_started_this_cycle())
@given(reshuffled(keep_reservations=True))
def test_reshuffled_priorities_with_carried_plans_change_nothing_for_other_budgets(
    triple: tuple[Case, Case, str],
) -> None:
    before, after, budget = triple
    assert about_others(before, decide(before), budget) == about_others(after, decide(after), budget)
