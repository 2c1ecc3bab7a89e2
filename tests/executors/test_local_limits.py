"""The local executor holds a job to the CPUs and memory it asked for (decision 60), with real processes: each
replica is pinned to cores of its own (sched_setaffinity) — a second attempt gets other cores while the host has
them — and its memory is capped with RLIMIT_DATA, so an allocation beyond it fails inside the job; spec.json records
what was asked and the cores; a job that asks for nothing runs unpinned and unlimited, as before."""

from __future__ import annotations

import json
import os
import resource
from dataclasses import replace
from pathlib import Path

import pytest

from allotment.core.model import Allocation
from allotment.executors.local import supervisor as sv
from allotment.executors.local.limits import choose_cores, pinned_cores
from allotment.ports.executor import EventKind

from .harness import Harness, finals

pytestmark = pytest.mark.timeout(60)

REPORT = (
    "import json, os, resource, sys\n"
    "out = {'cores': sorted(os.sched_getaffinity(0)), 'data': resource.getrlimit(resource.RLIMIT_DATA)[0]}\n"
    "try:\n"
    "    block = bytearray(int(sys.argv[2]) * 1024 * 1024)\n"
    "    out['allocated'] = True\n"
    "except MemoryError:\n"
    "    out['allocated'] = False\n"
    "json.dump(out, open(sys.argv[1], 'w'))\n"
)
HOST = sorted(os.sched_getaffinity(0))


def _run(harness: Harness, tmp_path: Path, job_id: str, cpus: int, memory: int, allocate: int) -> dict[str, object]:
    ex = harness.executor()
    out = tmp_path / f"{job_id}.json"
    spec = replace(harness.spec(job_id, REPORT, str(out), str(allocate)), cpus=cpus, memory=memory)
    ex.launch(spec)
    events = harness.until_final(ex, job_id)
    assert [(e.kind, e.exit_code) for e in finals(events)] == [(EventKind.EXITED, 0)]
    recorded = sv.read_json(ex.attempt_dir(job_id, 0) / sv.SPEC)
    assert recorded is not None and (recorded["cpus"], recorded["memory_mib"]) == (cpus, memory)
    return dict(json.loads(out.read_text()))


def test_a_job_is_pinned_to_its_cpus_and_held_to_its_memory(harness: Harness, tmp_path: Path) -> None:
    seen = _run(harness, tmp_path, "held", cpus=1, memory=256, allocate=512)
    assert seen["cores"] == HOST[:1]
    assert seen["data"] == 256 * 1024 * 1024
    assert seen["allocated"] is False  # 512 MiB beyond its 256


def test_memory_within_the_request_is_there(harness: Harness, tmp_path: Path) -> None:
    seen = _run(harness, tmp_path, "fits", cpus=0, memory=512, allocate=64)
    assert seen["allocated"] is True and seen["cores"] == HOST


def test_a_job_that_asks_for_nothing_is_not_held(harness: Harness, tmp_path: Path) -> None:
    seen = _run(harness, tmp_path, "free", cpus=0, memory=0, allocate=64)
    assert seen["cores"] == HOST
    assert seen["data"] == resource.getrlimit(resource.RLIMIT_DATA)[0]


@pytest.mark.skipif(len(HOST) < 2, reason="needs two cores")
def test_a_live_attempt_keeps_its_cores_and_the_next_gets_others(harness: Harness, tmp_path: Path) -> None:
    ex = harness.executor()
    ready = tmp_path / "ready"
    hold = "import pathlib, sys, time\npathlib.Path(sys.argv[1]).touch()\ntime.sleep(60)\n"
    first = replace(harness.spec("first", hold, str(ready)), cpus=1)
    ex.launch(first)
    harness.wait_until(ready.exists, "the first job to start")
    seen = _run(harness, tmp_path, "second", cpus=1, memory=0, allocate=1)
    first_cores = pinned_cores(sv.read_json(ex.attempt_dir("first", 0) / sv.SPEC))
    assert first_cores == HOST[:1] and seen["cores"] == HOST[1:2]
    ex.terminate("first", 0, 0)
    harness.until_final(ex, "first")


def test_each_replica_of_a_gang_gets_its_own_cores(harness: Harness) -> None:
    ex = harness.executor(nodes=("node-a", "node-b"))
    placement = (Allocation("node-a", ()), Allocation("node-b", ()))
    spec = replace(harness.spec("gang", "pass", placement=placement), cpus=1)
    ex.launch(spec)
    harness.until_final(ex, "gang")
    recorded = sv.read_json(ex.attempt_dir("gang", 0) / sv.SPEC)
    assert recorded is not None
    assert [r["cpuset"] for r in recorded["replicas"]] == choose_cores(HOST, [], 2, 1)


@pytest.mark.parametrize(
    ("available", "in_use", "replicas", "cpus", "sets"),
    [
        pytest.param([0, 1, 2, 3], [], 1, 2, [[0, 1]], id="lowest-free-cores"),
        pytest.param([0, 1, 2, 3], [0, 1], 1, 2, [[2, 3]], id="around-a-live-attempt"),
        pytest.param([0, 1, 2, 3], [], 2, 2, [[0, 1], [2, 3]], id="replicas-apart"),
        pytest.param([0, 1], [0, 1], 1, 1, [[0]], id="a-full-host-shares-the-least-used"),
        pytest.param([0, 1], [], 1, 4, [[0, 1]], id="more-than-the-host-gets-every-core"),
        pytest.param([0, 1], [], 1, 0, [], id="no-request-no-pinning"),
    ],
)
def test_choose_cores(available: list[int], in_use: list[int], replicas: int, cpus: int, sets: list[list[int]]) -> None:
    assert choose_cores(available, in_use, replicas, cpus) == sets
