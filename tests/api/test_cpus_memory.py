"""CPUs and memory per replica at the API: a job may ask for them beside its GPUs (memory as MiB or `16G`, `512M`),
the answer echoes what was stored, a bad size is refused with 422 naming the field, and a job whose CPUs or memory
no allowed node (or set of whole nodes) could ever hold is refused naming the field and the most a node offers.
The fleet is examples/small (cluster lab: 4 nodes × 8 H100, each declaring 224 CPUs and 2T), plus, where a row says
so, a cluster `bare` of 2 nodes × 8 H100 that declare neither (they count as unlimited)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from allotment.store.tables import ClusterRow, JobRow, NodeRow
from tests.api.conftest import Api


def add_bare(api: Api) -> None:
    with api.rig.sessions.begin() as s:
        s.add(ClusterRow(name="bare", topology=[]))
        s.flush()
        for i in range(2):
            s.add(
                NodeRow(
                    name=f"bare-{i}", cluster="bare", gpu_type="H100", gpus=8, labels={}, state="ready", forced=False,
                    updated_at=0,
                )
            )  # fmt: skip


def _jobs(api: Api) -> int:
    with api.rig.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(JobRow)) or 0)


ACCEPTED = [
    pytest.param({"cpus": 16, "memory": "64G"}, 16, 65536, id="one-replica-with-cpus-and-memory"),
    pytest.param({"memory": 512}, 0, 512, id="memory-as-an-integer-is-mib"),
    pytest.param({"memory": "1536M"}, 0, 1536, id="memory-in-mib"),
    pytest.param({"memory": "2Ti"}, 0, 2 * 1024 * 1024, id="a-whole-node-of-memory"),
    pytest.param({"gpus": 1, "replicas": 8, "cpus": 28}, 28, 0, id="eight-replicas-share-a-node's-cpus"),
    pytest.param({"gpus": 8, "replicas": 4, "cpus": 224}, 224, 0, id="whole-nodes-each-with-all-cpus"),
    pytest.param({}, 0, 0, id="no-request-by-default"),
]


@pytest.mark.parametrize(("resources", "cpus", "memory_mib"), ACCEPTED)
def test_cpus_and_memory_are_stored_per_replica_and_echoed(
    api: Api, resources: dict[str, Any], cpus: int, memory_mib: int
) -> None:
    job_id = api.submit("ben", "pretrain", resources=resources)
    detail = api.call("GET", f"/jobs/{job_id}", "ben").json()
    assert (detail["cpus"], detail["memory_mib"]) == (cpus, memory_mib)
    with api.rig.sessions() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        assert (row.cpus, row.memory_mib) == (cpus, memory_mib)


BAD = [
    pytest.param({"memory": "16X"}, "resources.memory", "not a memory size", id="unknown-unit"),
    pytest.param({"memory": "1.5G"}, "resources.memory", "not a memory size", id="fractional-size"),
    pytest.param({"memory": -1}, "resources.memory", "must not be negative", id="negative-memory"),
    pytest.param({"memory": "64K"}, "resources.memory", "use M, G or T", id="below-a-mib"),
    pytest.param({"cpus": -2}, "resources.cpus", "greater than or equal to 0", id="negative-cpus"),
    pytest.param({"cpus": "8"}, "resources.cpus", "valid integer", id="cpus-as-text"),
    pytest.param({"cpus": 1.5}, "resources.cpus", "valid integer", id="fractional-cpus"),
]


@pytest.mark.parametrize(("resources", "field", "part"), BAD)
def test_a_bad_cpu_or_memory_request_is_refused_naming_the_field(
    api: Api, resources: dict[str, Any], field: str, part: str
) -> None:
    response = api.call(
        "POST", "/jobs", "ben", {"spec": {"budget": "pretrain", "command": ["x"], "resources": resources}}
    )
    assert response.status_code == 422, response.text
    [problem] = response.json()["problems"]
    assert problem["field"] == field
    assert part in problem["reason"], problem["reason"]
    assert _jobs(api) == 0


NEVER = [
    pytest.param({"cpus": 225}, "resources.cpus", "the most on one allowed node is 224", id="more-cpus-than-a-node"),
    pytest.param(
        {"gpus": 1, "replicas": 8, "cpus": 29}, "resources.cpus", "8 × 29 CPUs", id="eight-replicas-overflow-one-node"
    ),
    pytest.param(
        {"gpus": 4, "replicas": 8, "cpus": 113},
        "resources.cpus",
        "no allowed node, or set of whole nodes",
        id="two-replicas-per-whole-node-overflow-it",
    ),
    pytest.param(
        {"memory": "3T"}, "resources.memory", "the most on one allowed node is 2T", id="more-memory-than-a-node"
    ),
    pytest.param(
        {"cpus": 8, "memory": "3T"}, "resources.memory", "beside the job's GPUs and CPUs", id="memory-beside-cpus"
    ),
]


@pytest.mark.parametrize(("resources", "field", "part"), NEVER)
def test_a_job_whose_cpus_or_memory_no_node_could_hold_is_refused(
    api: Api, resources: dict[str, Any], field: str, part: str
) -> None:
    response = api.call(
        "POST", "/jobs", "ben", {"spec": {"budget": "pretrain", "command": ["x"], "resources": resources}}
    )
    assert response.status_code == 422, response.text
    [problem] = response.json()["problems"]
    assert problem["field"] == field
    assert part in problem["reason"], problem["reason"]
    assert _jobs(api) == 0


def test_nodes_that_declare_nothing_hold_any_request(api: Api) -> None:
    add_bare(api)
    api.submit("ben", "pretrain", resources={"cpus": 4096, "memory": "64T", "clusters": ["bare"]})
    refused = api.call(
        "POST",
        "/jobs",
        "ben",
        {"spec": {"budget": "pretrain", "command": ["x"], "resources": {"cpus": 4096, "clusters": ["lab"]}}},
    )
    assert refused.status_code == 422


def test_a_yaml_spec_gets_the_line_of_a_bad_memory_size(api: Api) -> None:
    text = "budget: pretrain\ncommand: [x]\nresources:\n  gpus: 1\n  memory: lots\n"
    response = api.call("POST", "/jobs", "ben", {"yaml": text})
    [problem] = response.json()["problems"]
    assert (response.status_code, problem["field"], problem["line"]) == (422, "resources.memory", 5)


def test_why_says_a_job_waits_for_cpus_beside_free_gpus(api: Api) -> None:
    """examples/small: 4 nodes × 8 H100 with 224 CPUs. Four 1-GPU jobs take 200 CPUs of each node; a fifth asking
    for 32 CPUs finds GPUs free everywhere but the CPUs nowhere, and its reason says so in numbers."""
    hogs = [api.submit("ben", "pretrain", resources={"gpus": 1, "cpus": 200}) for _ in range(4)]
    api.rig.step()
    waiting = api.submit("ben", "pretrain", resources={"gpus": 1, "cpus": 32, "memory": "64G"})
    api.rig.step()
    states = {j["id"]: j["state"] for j in api.call("GET", "/jobs", "ben").json()["items"]}
    assert [states[h] for h in hogs] == ["running"] * 4 and states[waiting] == "pending"
    why = api.call("GET", f"/jobs/{waiting}/why", "ben").json()
    assert why["blocker"] == "capacity"
    assert "32 CPUs and 64 GiB per replica" in why["message"]
    assert "4 nodes have the GPUs free but not the CPUs or memory beside them" in why["message"]
    fits = api.submit("ben", "pretrain", resources={"gpus": 1, "cpus": 24})
    api.rig.step()
    assert api.call("GET", f"/jobs/{fits}", "ben").json()["state"] == "running"
