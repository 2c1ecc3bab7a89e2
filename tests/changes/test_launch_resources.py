"""A start's launch carries the CPUs and memory the run holds on each node (decision 60): the job's per-replica
request times the replicas placement put on a node (GPUs there ÷ GPUs per replica), through the intent outbox
unchanged; an intent written before these fields existed reads as no request."""

from __future__ import annotations

import pytest

from allotment.changes.decisions import decision_changes
from allotment.changes.intents import decode, encode
from allotment.changes.records import LaunchIntent
from allotment.core.decisions import Decisions, Start
from allotment.core.jobstate import JobState
from allotment.core.model import Allocation, RunClass
from tests.changes.support import PERIOD, RULES, SNAP, T0, job


@pytest.mark.parametrize(
    ("gpus", "cpus", "memory", "placement", "per_node"),
    [
        pytest.param(1, 16, 65536, ((0, 1, 2, 3),), (64, 262144), id="four-replicas-on-one-node"),
        pytest.param(4, 16, 0, ((0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 3, 4, 5, 6, 7)), (32, 0), id="whole-nodes"),
        pytest.param(3, 8, 1024, ((0, 1, 2, 3, 4, 5, 6, 7),), (16, 2048), id="gpus-that-leave-some-over"),
        pytest.param(8, 0, 0, ((0, 1, 2, 3, 4, 5, 6, 7),), (0, 0), id="no-request"),
    ],
)
def test_a_launch_holds_the_request_of_the_replicas_on_each_node(
    gpus: int, cpus: int, memory: int, placement: tuple[tuple[int, ...], ...], per_node: tuple[int, int]
) -> None:
    allocs = tuple(Allocation(f"n{i + 1}", g) for i, g in enumerate(placement))
    d = Decisions(starts=(Start("j1", allocs, RunClass.GUARANTEED, T0 + 3600, "fair-share"),))
    facts = {"j1": job(state=JobState.PENDING, gpus=gpus, cpus=cpus, memory=memory)}
    (intent,) = decision_changes(SNAP, d, T0, RULES, {}, facts, {}, PERIOD).intents
    assert isinstance(intent, LaunchIntent)
    assert (intent.spec.cpus, intent.spec.memory) == per_node
    kind, job_id, attempt, _, payload = encode(intent)
    again = decode(7, kind.value, job_id, attempt, payload).spec
    assert again is not None and (again.cpus, again.memory) == per_node


def test_an_intent_written_before_cpus_and_memory_reads_as_no_request() -> None:
    d = Decisions(starts=(Start("j1", (Allocation("n1", (0,)),), RunClass.GUARANTEED, T0 + 3600, "fair-share"),))
    (intent,) = decision_changes(SNAP, d, T0, RULES, {}, {"j1": job(state=JobState.PENDING)}, {}, PERIOD).intents
    assert isinstance(intent, LaunchIntent)
    kind, job_id, attempt, _, payload = encode(intent)
    old = {k: v for k, v in payload.items() if k not in ("cpus", "memory")}
    spec = decode(7, kind.value, job_id, attempt, old).spec
    assert spec is not None and (spec.cpus, spec.memory) == (0, 0)
