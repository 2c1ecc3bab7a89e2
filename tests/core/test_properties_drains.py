"""Promise 4: a drained node empties within max_slice + max_grace with no negotiation, and the operator is shown when
it will be empty; nothing new lands on a node that is not ready; slices never extend past the start of a capacity
window on the GPUs it reserves."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from allotment.core.model import NodeState, Snapshot
from tests.core.builders import HOUR, World
from tests.core.strategies import CALM, DRIVEN, PROPERTY, ROOMY, Case, CheckedDriver, Draw, cases, decide, node_map


@PROPERTY
@given(cases())
def test_no_work_outside_a_slice_stays_on_a_draining_node(case: Case) -> None:
    snap, now = case.snapshot, case.now
    d = decide(case)
    nodes = node_map(snap)
    draining = {n.name for n in snap.nodes if n.state is NodeState.DRAINING}
    preempted = {p.job_id for p in d.preempts}
    renewed = {r.job_id for r in d.renews}
    for job in snap.jobs:
        run = job.run
        if run is None or not any(a.node in draining for a in run.placement):
            continue
        assert job.id not in renewed, f"{job.id}: slice renewed on a draining node"
        if run.preemption is None and not run.in_slice(now):
            assert job.id in preempted, f"{job.id} stays on a draining node outside its slice"
    for s in d.starts:
        for a in s.placement:
            assert nodes[a.node].state is NodeState.READY, f"{s.job_id} started on {nodes[a.node].state} {a.node}"


@PROPERTY
@given(cases())
def test_every_draining_node_has_an_estimate_within_max_slice_and_grace(case: Case) -> None:
    snap, now, pol = case.snapshot, case.now, case.snapshot.policy
    d = decide(case)
    draining = {n.name for n in snap.nodes if n.state is NodeState.DRAINING}
    assert set(d.drain_estimates) == draining
    grace = {p.job_id: p.grace for p in d.preempts}
    for name, at in d.drain_estimates.items():
        assert now <= at <= now + pol.max_slice + pol.max_grace, f"{name} empty only at {at} (now {now})"
        for job in snap.jobs:
            run = job.run
            if run is None or name not in run.nodes:
                continue
            if job.id in grace:
                leaves = now + grace[job.id]
            elif run.preemption is not None:
                leaves = run.preemption.kill_at
            elif run.in_slice(now) and run.slice_end is not None:
                leaves = run.slice_end + min(job.grace, pol.max_grace)
            else:
                continue
            assert leaves <= at, f"{job.id} leaves {name} at {leaves}, after its estimate {at}"


def _pool_gpus(snap: Snapshot) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for n in snap.nodes:
        if n.state in (NodeState.READY, NodeState.CORDONED):
            out[(n.cluster, n.gpu_type)] = out.get((n.cluster, n.gpu_type), 0) + n.gpus
    return out


@PROPERTY
@given(st.one_of(cases(), cases(ROOMY)))
def test_no_slice_crowds_out_a_capacity_window(case: Case) -> None:
    """A slice granted or renewed on a pool past a window's start (or while it is open) leaves the window's GPUs free
    of other budgets' slices."""
    snap, now = case.snapshot, case.now
    d = decide(case)
    nodes = node_map(snap)
    jobs = {j.id: j for j in snap.jobs}
    capacity = _pool_gpus(snap)
    # (budget, pool, gpus, slice end) of every slice after this cycle, and of those granted in it
    slices: list[tuple[str, tuple[str, str], int, int]] = []
    granted: list[tuple[str, tuple[str, str], int, int]] = []
    renewed = {r.job_id: r.slice_end for r in d.renews}
    for job in snap.jobs:
        run = job.run
        if run is None or run.preemption is not None:
            continue
        end = renewed.get(job.id, run.slice_end if run.in_slice(now) else None)
        if end is None:
            continue
        for a in run.placement:
            n = nodes.get(a.node)
            if n is not None:
                item = (job.budget, (n.cluster, n.gpu_type), len(a.gpus), end)
                slices.append(item)
                if job.id in renewed:
                    granted.append(item)
    for s in d.starts:
        if s.slice_end is not None:
            for a in s.placement:
                n = nodes[a.node]
                item = (jobs[s.job_id].budget, (n.cluster, n.gpu_type), len(a.gpus), s.slice_end)
                slices.append(item)
                granted.append(item)
    for w in snap.windows:
        if w.end <= now:
            continue
        pool = (w.cluster, w.gpu_type)
        at = max(w.start, now)
        if not any(b != w.budget and p == pool and end > at for b, p, _, end in granted):
            continue
        booked = sum(v.gpus for v in snap.windows if (v.cluster, v.gpu_type) == pool and v.start < w.end and at < v.end)
        if booked > capacity.get(pool, 0):
            continue  # lost nodes overbooked the pool: no slice rule can keep every window whole
        others = sum(g for b, p, g, end in slices if b != w.budget and p == pool and end > at)
        room = capacity.get(pool, 0) - w.gpus
        assert others <= room, f"window {w.id} ({w.gpus} of {capacity.get(pool, 0)} GPUs) crowded: {others} held"


@st.composite
def drained_midway(draw: Draw) -> tuple[Case, int, list[str]]:
    case = draw(cases(CALM))
    warmup = draw(st.integers(0, 3 * 3600))
    names = draw(st.lists(st.sampled_from([n.name for n in case.snapshot.nodes]), min_size=1, max_size=3, unique=True))
    return case, warmup, names


@DRIVEN
@given(drained_midway())
def test_a_drained_node_is_empty_by_its_first_estimate(args: tuple[Case, int, list[str]]) -> None:
    case, warmup, names = args
    drv = CheckedDriver(case.snapshot, case.durations, case.now)
    drv.run_until(case.now + warmup, every=600)
    forced = set(names[:1]) if len(names) > 1 else set()
    nodes = tuple(
        replace(n, state=NodeState.DRAINING, forced=n.name in forced) if n.name in names else n
        for n in drv.snapshot.nodes
    )
    drv.set_snapshot(nodes=nodes)
    first = drv.step(drv.now + 1).drain_estimates
    assert set(first) == set(names)
    for name in sorted(names, key=lambda n: first[n]):
        drv.run_until(max(first[name], drv.now), every=600)
        # a job whose kill deadline is the estimate itself is gone at that instant
        holders = [
            j.id
            for j in drv.jobs.values()
            if j.run is not None
            and name in j.run.nodes
            and (j.run.preemption is None or j.run.preemption.kill_at > first[name])
        ]
        assert not holders, f"{name} still held by {holders} at its estimate {first[name]}"


def test_a_slice_started_under_a_window_ends_before_the_next_window_of_another_budget() -> None:
    w = World().cluster("c1", nodes=1).budget("bravo").budget("alpha")
    w.window("now", "bravo", "c1", gpus=8, start=0, end=HOUR)
    w.window("next", "alpha", "c1", gpus=8, start=HOUR, end=10 * HOUR)
    w.pending("b", "bravo", gpus=8, slice_seconds=8 * HOUR)
    d = decide(Case(w.snapshot(), 60, {}))
    for s in d.starts:
        assert s.slice_end is None or s.slice_end <= HOUR, f"{s.job_id}'s slice runs to {s.slice_end}"
