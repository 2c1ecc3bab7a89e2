"""Promise 7: a gang is placed whole, in one cluster and one GPU type, or not at all; multi-node gangs get whole free
nodes, in one rack when a rack with enough free nodes was available. And a job is started once, only while it
waits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from allotment.core.model import NodeState
from tests.core.strategies import PROPERTY, ROOMY, Case, cases, decide, held_gpus, node_map, nodes_needed


@PROPERTY
@given(st.one_of(cases(), cases(ROOMY)))
def test_every_start_is_a_whole_gang_on_free_gpus_of_one_pool(case: Case) -> None:
    snap = case.snapshot
    d = decide(case)
    nodes = node_map(snap)
    jobs = {j.id: j for j in snap.jobs}
    held = held_gpus(snap)
    ids = [s.job_id for s in d.starts]
    assert len(ids) == len(set(ids)), f"a job started twice in one cycle: {ids}"
    for s in d.starts:
        job = jobs[s.job_id]
        assert job.pending, f"{s.job_id} is not pending but was started"
        k = nodes_needed(job)
        names = [a.node for a in s.placement]
        assert len(names) == len(set(names)), f"{s.job_id} placed twice on one node"
        pools = {(nodes[n].cluster, nodes[n].gpu_type) for n in names}
        assert len(pools) == 1, f"{s.job_id} spans pools {pools}"
        cluster, gtype = pools.pop()
        assert not job.gpu_types or gtype in job.gpu_types
        assert not job.clusters or cluster in job.clusters
        if k == 1:
            assert len(s.placement) == 1 and len(s.placement[0].gpus) == job.total_gpus
        else:
            assert len(s.placement) == k, f"{s.job_id} needs {k} nodes, got {len(s.placement)}"
            for a in s.placement:
                assert not held[a.node], f"{s.job_id}: multi-node gang on {a.node}, which is not entirely free"
                assert sorted(a.gpus) == list(range(nodes[a.node].gpus))
        for a in s.placement:
            assert nodes[a.node].state is NodeState.READY
            assert len(a.gpus) == len(set(a.gpus)) and all(0 <= g < nodes[a.node].gpus for g in a.gpus)
            clash = held[a.node] & set(a.gpus)
            assert not clash, f"{s.job_id} takes GPUs {sorted(clash)} of {a.node}, already held"
            held[a.node] |= set(a.gpus)


@PROPERTY
@given(st.one_of(cases(), cases(ROOMY)))
def test_multi_node_gangs_land_in_one_rack_when_one_had_room(case: Case) -> None:
    snap = case.snapshot
    d = decide(case)
    nodes = node_map(snap)
    jobs = {j.id: j for j in snap.jobs}
    held = held_gpus(snap)
    for s in d.starts:
        for a in s.placement:
            held[a.node] |= set(a.gpus)
    claimed = {name for r in d.reserves for name, _ in r.nodes}
    for s in d.starts:
        job = jobs[s.job_id]
        k = nodes_needed(job)
        if k <= 1 or s.rule == "reservation":
            continue
        racks = {nodes[a.node].label("rack") for a in s.placement}
        if len(racks) == 1:
            continue
        first = nodes[s.placement[0].node]
        mine = {a.node for a in s.placement}
        # nodes free when the gang was placed: still free and unclaimed after the cycle, or taken by the gang itself
        free_then = [
            n
            for n in snap.nodes
            if (n.cluster, n.gpu_type) == (first.cluster, first.gpu_type)
            and n.state is NodeState.READY
            and (n.name in mine or (not held[n.name] and n.name not in claimed))
        ]
        per_rack: dict[str | None, int] = {}
        for n in free_then:
            per_rack[n.label("rack")] = per_rack.get(n.label("rack"), 0) + 1
        roomy = [r for r, c in per_rack.items() if c >= k]
        assert not roomy, f"{s.job_id} spread over racks {racks} while rack(s) {roomy} had {k} free nodes"
