"""Rule `cpus-and-memory-beside-gpus` (decision 60): a node takes a job's GPUs only where its free CPUs and memory
also hold the job's replicas there (replicas × the request; a multi-node gang's whole nodes each hold as many
replicas as fit their GPUs); a node that declares none, or a job that asks for none, counts nothing. Preemption
frees a node only when its victims also give back the CPUs and memory; a planned start waits for them too; and a
job that waits for CPUs or memory says so."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Blocker
from allotment.core.model import ContractClass
from tests.core.builders import HOUR, World

decide = AllotmentPolicy().decide
GIB = 1024


def world(cpus: int = 64, memory: int = 512 * GIB, nodes: int = 2) -> World:
    """One cluster of `nodes` × 8 H100 declaring `cpus` CPUs and `memory` MiB each; budgets org → {a, b}."""
    w = World().cluster("c1", nodes=nodes, cpus=cpus, memory=memory)
    return w.budget("org", alloc=2000).budget("a", "org").budget("b", "org")


@dataclass(frozen=True)
class FitCase:
    name: str
    job: dict[str, Any]
    running: dict[str, dict[str, Any]] = field(default_factory=dict)
    """job id → {"on": {node: GPUs}, plus Job fields}: work already on the nodes (inside its slice)."""
    node: str | None = None
    """Where the job starts, or None when it waits."""
    cpus: int = 64
    memory: int = 512 * GIB


N0, N1 = "c1-h100-00", "c1-h100-01"

FIT_CASES = [
    FitCase("no request packs as before", {"gpus": 2}, {"x": {"on": {N1: 6}, "cpus": 60}}, node=N1),
    FitCase("the fullest node whose cpus fit", {"gpus": 2, "cpus": 8}, {"x": {"on": {N1: 6}, "cpus": 60}}, node=N0),
    FitCase("cpus fit exactly", {"gpus": 2, "cpus": 4}, {"x": {"on": {N1: 6}, "cpus": 60}}, node=N1),
    FitCase(
        "memory decides like cpus",
        {"gpus": 2, "memory": 64 * GIB},
        {"x": {"on": {N1: 6}, "memory": 480 * GIB}},
        node=N0,
    ),
    FitCase(
        "replicas on one node multiply the request",
        {"gpus": 1, "replicas": 4, "cpus": 17},
        {"x": {"on": {N0: 1}, "cpus": 1}, "y": {"on": {N1: 1}, "cpus": 1}},
        node=None,
    ),
    FitCase(
        "replicas on one node that fit",
        {"gpus": 1, "replicas": 4, "cpus": 15},
        {"x": {"on": {N0: 1}, "cpus": 4}, "y": {"on": {N1: 1}, "cpus": 1}},
        node=N0,
    ),
    FitCase("undeclared nodes count nothing", {"gpus": 2, "cpus": 4096}, {}, node=N0, cpus=0, memory=0),
    FitCase("more than a node offers never starts", {"gpus": 1, "cpus": 65}, {}, node=None),
]


@pytest.mark.parametrize("case", FIT_CASES, ids=lambda c: c.name)
def test_a_job_lands_where_its_cpus_and_memory_fit(case: FitCase) -> None:
    w = world(case.cpus, case.memory)
    for jid, given in case.running.items():
        spec = dict(given)
        w.running(jid, "b", spec.pop("on"), slice_end=9 * HOUR, **spec)
    w.pending("job", "a", **case.job)
    d = decide(w.snapshot(), 100)
    starts = {s.job_id: s for s in d.starts}
    if case.node is None:
        assert "job" not in starts
    else:
        assert {a.node for a in starts["job"].placement} == {case.node}


def test_two_starts_in_one_cycle_share_a_nodes_cpus() -> None:
    w = world(cpus=64, nodes=1)
    w.pending("first", "a", gpus=2, cpus=40, submitted_at=1).pending("second", "a", gpus=2, cpus=40, submitted_at=2)
    w.pending("third", "a", gpus=2, cpus=24, submitted_at=3)
    d = decide(w.snapshot(), 100)
    assert sorted(s.job_id for s in d.starts) == ["first", "third"]
    assert d.pending["second"].blocker is Blocker.CAPACITY


def test_a_multi_node_gang_needs_the_cpus_of_each_whole_node() -> None:
    w = world(cpus=64, nodes=3)
    w.running("x", "b", {"c1-h100-02": 0}, slice_end=9 * HOUR)  # holds no GPU
    w.pending("gang", "a", gpus=4, replicas=4, cpus=32)  # two replicas on each of two whole nodes: 64 CPUs each
    d = decide(w.snapshot(), 100)
    (start,) = d.starts
    assert len(start.placement) == 2
    w2 = world(cpus=64, nodes=2).pending("gang", "a", gpus=4, replicas=4, cpus=33)
    assert decide(w2.snapshot(), 100).starts == ()


def test_preemption_frees_a_node_only_where_the_victims_give_back_the_cpus() -> None:
    # N0: opportunistic work on 4 GPUs with 1 CPU, plus slice work on 2 GPUs holding 60 of its 64 CPUs;
    # N1: opportunistic work on 8 GPUs with 1 CPU. A 4-GPU job asking 8 CPUs: preempting opp0 would free the GPUs
    # on N0 but give back only 1 CPU (4 free there), so it preempts on N1 instead.
    w = world(cpus=64)
    w.running("opp0", "b", {N0: 4}, cpus=1, contract=ContractClass.OPPORTUNISTIC)
    w.running("slice0", "b", {N0: 2}, cpus=60, slice_end=9 * HOUR)
    w.running("opp1", "b", {N1: 8}, cpus=1, contract=ContractClass.OPPORTUNISTIC)
    w.pending("job", "a", gpus=4, cpus=8)
    d = decide(w.snapshot(), 100)
    victims = {p.job_id for p in d.preempts}
    assert victims == {"opp1"}, victims
    (reserve,) = [r for r in d.reserves if r.job_id == "job"]
    assert [n for n, _ in reserve.nodes] == [N1]
    w.jobs["slice0"] = replace(w.jobs["slice0"], cpus=56)  # now opp0's CPU is enough: the cheaper victim wins again
    assert {p.job_id for p in decide(w.snapshot(), 100).preempts} == {"opp0"}


def test_a_planned_start_waits_for_the_cpus_too() -> None:
    # one node: slice work on 2 GPUs holding 60 of its 64 CPUs until 2 h, other slice work on 6 GPUs until 1 h
    w = world(cpus=64, nodes=1)
    w.running("cpu-heavy", "b", {N0: 2}, cpus=60, slice_end=2 * HOUR)
    w.running("gpu-heavy", "b", {N0: 6}, cpus=0, slice_end=1 * HOUR)
    w.pending("job", "a", gpus=4, cpus=16)
    d = decide(w.snapshot(), 100)
    (reserve,) = [r for r in d.reserves if r.job_id == "job"]
    assert reserve.planned_start >= 2 * HOUR
    w2 = world(cpus=64, nodes=1)
    w2.running("cpu-heavy", "b", {N0: 2}, cpus=60, slice_end=2 * HOUR)
    w2.running("gpu-heavy", "b", {N0: 6}, cpus=0, slice_end=1 * HOUR)
    w2.pending("job", "a", gpus=4)
    (plain,) = [r for r in decide(w2.snapshot(), 100).reserves if r.job_id == "job"]
    assert HOUR <= plain.planned_start < 2 * HOUR


def test_a_job_waiting_for_cpus_says_so() -> None:
    w = world(cpus=64, memory=512 * GIB, nodes=1)
    w.running("x", "b", {N0: 2}, cpus=60, slice_end=9 * HOUR)
    w.pending("job", "a", gpus=2, cpus=8, memory=64 * GIB)
    d = decide(w.snapshot(), 100)
    reason = d.pending["job"]
    assert reason.blocker is Blocker.CAPACITY
    assert "8 CPUs and 64 GiB per replica" in reason.message
    assert "1 node has the GPUs free but not the CPUs or memory beside them" in reason.message
    assert reason.estimated_start is not None and reason.estimated_start >= 9 * HOUR
