"""A job that no node or cluster of the fleet could ever hold is refused with 422 naming the field and the largest
possible shape, instead of being accepted and waiting forever; a job that fits some pool is accepted, even when it
cannot start now. The fleet is examples/small (cluster lab: 4 nodes × 8 H100), plus, where a row says so, a cluster
`edge` of 2 nodes × 4 H100 (as a fleet sync would discover it) and a cluster `spare` without nodes."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from allotment.store.tables import ClusterRow, JobRow, NodeRow
from tests.api.conftest import Api

LARGEST = "the largest job this fleet can hold is 4 replicas × 8 GPUs (32 × H100 on cluster lab)"

REFUSED = [
    pytest.param(
        {"gpus": 9},
        "resources.gpus",
        ["9 GPUs per replica exceeds the largest node (8 × H100 on cluster lab)", LARGEST],
        id="9-gpus-on-8-gpu-nodes",
    ),
    pytest.param(
        {"gpus": 8, "replicas": 5},
        "resources.replicas",
        ["5 replicas × 8 GPUs need 5 whole nodes of 8 × H100", "at most 4 replicas fit", LARGEST],
        id="5-whole-nodes-of-4",
    ),
    pytest.param(
        {"gpus": 4, "replicas": 9},
        "resources.replicas",
        ["need 5 whole nodes", "at most 8 replicas fit"],
        id="9-replicas-of-4-gpus",
    ),
    pytest.param(
        {"gpus": 8, "clusters": ["edge"]},
        "resources.gpus",
        [
            "exceeds the largest allowed node (4 × H100 on cluster edge)",
            "the largest job the allowed GPU types and clusters can hold is 2 replicas × 4 GPUs (8 × H100 on cluster "
            "edge)",
        ],
        id="smaller-nodes-of-an-allowed-cluster",
    ),
    pytest.param(
        {"gpus": 1, "clusters": ["spare"]},
        "resources.clusters",
        ["no node has GPUs on cluster spare", "8 × H100 on lab"],
        id="a-cluster-without-nodes",
    ),
    pytest.param(
        {"gpus": 1, "gpu_types": ["H100"], "clusters": ["spare"]},
        "resources.gpu_types",
        ["no node has GPUs of type H100 on cluster spare"],
        id="types-and-clusters-that-share-no-node",
    ),
]

ACCEPTED = [
    pytest.param({"gpus": 8, "replicas": 4}, id="the-whole-fleet"),
    pytest.param({"gpus": 4, "replicas": 8}, id="8-replicas-of-4"),
    pytest.param({"gpus": 3, "replicas": 8}, id="2-replicas-per-node"),
    pytest.param({"gpus": 4, "replicas": 2, "clusters": ["edge"]}, id="all-of-edge"),
]


def add_clusters(api: Api) -> None:
    with api.rig.sessions.begin() as s:
        s.add_all([ClusterRow(name="edge", topology=[]), ClusterRow(name="spare", topology=[])])
        s.flush()
        for i in range(2):
            s.add(
                NodeRow(
                    name=f"edge-{i}",
                    cluster="edge",
                    gpu_type="H100",
                    gpus=4,
                    labels={},
                    state="ready",
                    forced=False,
                    updated_at=0,
                )
            )


def _jobs(api: Api) -> int:
    with api.rig.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(JobRow)) or 0)


@pytest.mark.parametrize(("resources", "field", "parts"), REFUSED)
def test_a_job_no_pool_could_ever_hold_is_refused_naming_the_largest_shape(
    api: Api, resources: dict[str, Any], field: str, parts: list[str]
) -> None:
    add_clusters(api)
    response = api.call(
        "POST", "/jobs", "ben", {"spec": {"budget": "pretrain", "command": ["x"], "resources": resources}}
    )
    assert response.status_code == 422, response.text
    [problem] = response.json()["problems"]
    assert problem["field"] == field
    for part in parts:
        assert part in problem["reason"], problem["reason"]
    assert _jobs(api) == 0


@pytest.mark.parametrize("resources", ACCEPTED)
def test_a_job_some_pool_could_hold_is_accepted(api: Api, resources: dict[str, Any]) -> None:
    add_clusters(api)
    api.submit("ben", "pretrain", resources=resources)


def test_a_yaml_spec_gets_the_line_of_the_field(api: Api) -> None:
    text = "budget: pretrain\ncommand: [x]\nresources:\n  gpus: 16\n"
    response = api.call("POST", "/jobs", "ben", {"yaml": text})
    [problem] = response.json()["problems"]
    assert (response.status_code, problem["field"], problem["line"]) == (422, "resources.gpus", 4)


def test_down_and_draining_nodes_still_count(api: Api) -> None:
    """A node that is down comes back: the fleet's shape is every node, not the ready ones."""
    with api.rig.sessions.begin() as s:
        for node in s.scalars(select(NodeRow)):
            node.state = "down"
    api.submit("ben", "pretrain", resources={"gpus": 8, "replicas": 4})
