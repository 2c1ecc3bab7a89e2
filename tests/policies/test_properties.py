"""Properties every baseline keeps on random snapshots: it never over-allocates a node (starts use free GPU indices
of ready nodes, each once, gangs whole), preempts only running work once, explains every job it leaves waiting, and
is deterministic (the same snapshot gives equal decisions, whatever order the jobs are listed in)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allotment.core.decisions import Decisions
from allotment.core.model import NodeState, RunClass
from allotment.policies import make_policy, policy_names
from tests.core.strategies import Case, Draw, cases, held_gpus, node_map, pools_of, with_jobs

BASELINE = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def canonical(d: Decisions) -> Decisions:
    return replace(
        d,
        starts=tuple(sorted(d.starts, key=lambda s: s.job_id)),
        preempts=tuple(sorted(d.preempts, key=lambda p: p.job_id)),
        reserves=tuple(sorted(d.reserves, key=lambda r: r.job_id)),
    )


@st.composite
def shuffled(draw: Draw) -> tuple[Case, Case]:
    case = draw(cases())
    return case, with_jobs(case, list(draw(st.permutations(case.snapshot.jobs))))


@pytest.mark.parametrize("policy", policy_names())
@BASELINE
@given(case=cases())
def test_a_baseline_never_over_allocates_and_explains_every_wait(policy: str, case: Case) -> None:
    snap = case.snapshot
    d = make_policy(policy).decide(snap, case.now)
    nodes = node_map(snap)
    jobs = {j.id: j for j in snap.jobs}
    taken = held_gpus(snap)
    for s in d.starts:
        job = jobs[s.job_id]
        assert job.run is None
        pools = {(nodes[a.node].cluster, nodes[a.node].gpu_type) for a in s.placement}
        assert len(pools) == 1 and pools <= set(pools_of(snap, job))
        for a in s.placement:
            node = nodes[a.node]
            assert node.state is NodeState.READY
            assert all(0 <= g < node.gpus for g in a.gpus)
            assert not taken.setdefault(a.node, set()) & set(a.gpus), "a GPU given twice"
            taken[a.node] |= set(a.gpus)
        held = sum(len(a.gpus) for a in s.placement)
        if len(s.placement) == 1:
            assert held == job.total_gpus
        else:
            assert all(len(a.gpus) == nodes[a.node].gpus for a in s.placement), "a multi-node gang gets whole nodes"
            assert held >= job.total_gpus
    preempted = [p.job_id for p in d.preempts]
    assert len(preempted) == len(set(preempted))
    for jid in preempted:
        run = jobs[jid].run
        assert run is not None and run.preemption is None
    started = {s.job_id for s in d.starts}
    waiting = {j.id for j in snap.jobs if j.run is None} - started
    assert set(d.pending) == waiting


@pytest.mark.parametrize("policy", policy_names())
@BASELINE
@given(pair=shuffled())
def test_a_baseline_is_deterministic(policy: str, pair: tuple[Case, Case]) -> None:
    a, b = pair
    first = make_policy(policy).decide(a.snapshot, a.now)
    assert make_policy(policy).decide(a.snapshot, a.now) == first
    assert canonical(make_policy(policy).decide(b.snapshot, b.now)) == canonical(first)


END_OF_LIFE = {"node-down", "forced-drain", "max-runtime", "session-end"}


@pytest.mark.parametrize("policy", policy_names())
@BASELINE
@given(case=cases())
def test_a_baseline_preempts_only_what_its_rules_allow(policy: str, case: Case) -> None:
    """FIFO and Slurm never preempt by scheduling (only ends of life; drains wait); the old priority scheduler
    preempts only preemptible work of strictly lower priority; Kueue only for fair share or a drain; nobody reclaims
    an idle session."""
    snap = case.snapshot
    jobs = {j.id: j for j in snap.jobs}
    allowed = {
        "fifo": END_OF_LIFE,
        "fifo-strict": END_OF_LIFE,
        "slurm": END_OF_LIFE,
        "priority": END_OF_LIFE | {"drain", "priority"},
        "kueue": END_OF_LIFE | {"drain", "fair-share"},
    }[policy]
    for p in make_policy(policy).decide(snap, case.now).preempts:
        assert p.reason.value in allowed
        if p.reason.value in ("priority", "drain") and policy == "priority":
            victim = jobs[p.job_id]
            assert victim.run is not None and victim.run.run_class is RunClass.OPPORTUNISTIC
            if p.preemptor is not None:
                assert victim.priority < jobs[p.preemptor].priority
