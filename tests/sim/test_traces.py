"""Trace importers on small fixture slices: rows, timing, gang shapes, the fleet-sizing and budgets rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from allotment.config import load_config
from allotment.sim.traces import (
    Replay,
    Sizing,
    TraceRow,
    demand_curve,
    fleet_gpus,
    organisation,
    read_itp,
    read_philly,
    trace_workload,
    window,
)
from allotment.sim.workload import gang_shape

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def test_itp_reads_plain_and_gzipped_files_one_team_per_cluster() -> None:
    rows = read_itp((FIXTURES / "itp").iterdir())
    assert [(r.id, r.team, r.submit, r.duration, r.gpus) for r in rows] == [
        ("a1", "c01", 100, 3600, 1),
        ("a2", "c01", 100, 7200, 8),
        ("a3", "c01", 3700, 3600, 16),
        ("b1", "c02", 0, 3600, 4),
        ("b2", "c02", 90000, 600, 2),
    ]


def test_philly_is_timed_from_its_first_submission_with_the_vc_as_team() -> None:
    rows = read_philly(FIXTURES / "philly.csv")
    assert [(r.team, r.submit, r.duration, r.gpus) for r in rows] == [
        ("vca", 0, 7200, 12),
        ("vcb", 3600, 3600, 1),
        ("vca", 86400, 60, 1),
    ]


@pytest.mark.parametrize(
    ("name", "gpus", "shape"),
    [("one GPU", 1, (1, 1)), ("a node", 8, (8, 1)), ("two nodes", 16, (8, 2)), ("12 rounds up to 2 nodes", 12, (8, 2))],
)
def test_gang_shape(name: str, gpus: int, shape: tuple[int, int]) -> None:
    assert gang_shape(gpus) == shape, name


def test_window_retimes_and_cuts() -> None:
    rows = [TraceRow("x", "t", 0, 10, 1), TraceRow("y", "t", 86400, 10, 1), TraceRow("z", "t", 2 * 86400, 10, 1)]
    assert [(r.id, r.submit) for r in window(rows, days=1, skip_days=1)] == [("y", 0)]
    assert len(window(rows, None)) == 3


def test_fleet_sizing_rules() -> None:
    # 0–1 h: 8 GPUs; 1–2 h: 16; 2–10 h: 8 (submissions end at 2 h: the median is over [0, 2 h) → 8 and 16 tie → 8)
    rows = [TraceRow("a", "t", 0, 36000, 8), TraceRow("b", "t", 3600, 3600, 8), TraceRow("c", "t", 7200, 60, 1)]
    assert demand_curve(rows)[:3] == [(0, 8), (3600, 16), (7200, 9)]
    assert fleet_gpus(rows, Sizing.CONTENDED) == 8
    assert fleet_gpus(rows, Sizing.ORIGINAL) == 16


def test_allocations_follow_the_gpu_hours_each_team_asked_for(tmp_path: Path) -> None:
    rows = [TraceRow("a", "big", 0, 3 * 3600, 8), TraceRow("b", "small", 0, 3600, 8)]
    org = organisation("t", rows, 16)
    leaves = {b["name"]: b["allocation"] for b in org["budgets"] if b.get("parent") == "org"}
    assert leaves == {"vc-big": 16 * 720 * 3 // 4, "vc-small": 16 * 720 // 4}


def test_trace_workload_writes_a_valid_organisation(tmp_path: Path) -> None:
    w = trace_workload("philly", FIXTURES / "philly.csv", tmp_path, Replay(sizing=Sizing.ORIGINAL))
    cfg = load_config(w.config)
    assert sum(cfg.gpus_by_type().values()) == 24  # the 12-GPU job holds two whole nodes, plus one GPU → 3 nodes
    assert {j.budget for j in w.jobs} == {"vc-vca", "vc-vcb"}
    assert (w.jobs[0].gpus, w.jobs[0].replicas) == (8, 2)


def test_the_repository_carries_both_traces_compressed() -> None:
    itp = read_itp((REPO / "data" / "traces" / "itp-2021").glob("cluster*.csv.gz"))
    assert len(itp) == 69_351
    philly = read_philly(REPO / "data" / "traces" / "philly-2017" / "philly.csv.gz")
    assert len(philly) == 82_247
    assert len({r.team for r in philly}) == 15


def test_partitioned_sizing_puts_each_team_on_its_own_nodes(tmp_path: Path) -> None:
    w = trace_workload("itp", FIXTURES / "itp", tmp_path, Replay(sizing=Sizing.PARTITIONED))
    cfg = load_config(w.config)
    sizes = {c.name: sum(g.count * g.gpus_per_node for g in c.node_groups) for c in cfg.fleet.clusters}
    assert sizes == {"itp-c01": 16, "itp-c02": 8}  # c01's largest job is a 16-GPU gang; c02's median is 4 → a node
    assert {j.clusters for j in w.jobs if j.budget == "vc-c01"} == {("itp-c01",)}
