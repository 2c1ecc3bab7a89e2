"""What-if budgeting: a budget plan replayed over a recorded history (an Allotment database, or a trace)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from allotment.cli.main import app
from allotment.config import load_config
from allotment.core.cycle import AllotmentPolicy
from allotment.sim.runner import SimOptions, Simulation
from allotment.sim.whatif import apply_plan, history_from_database, load_plan, period_start
from allotment.sim.workload import Workload
from tests.sim.builders import sim_job

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
FIXTURES = Path(__file__).parent / "fixtures"
H = 3600


def _history(db: Path) -> str:
    """Record a small history in an Allotment database by running it through the engine."""
    url = f"sqlite:///{db}"
    jobs = [
        *(sim_job(f"seg{i}", submit=i * H, budget="segmentation", user="eli", work=2 * H) for i in range(4)),
        *(sim_job(f"det{i}", submit=i * H, budget="detection", user="dana", work=H) for i in range(3)),
    ]
    options = SimOptions(store="sqlite", database_url=url)
    Simulation(Workload("history", SMALL, tuple(jobs), 12 * H), AllotmentPolicy(), options).run()
    return url


def test_history_from_the_database_keeps_what_each_job_asked_for_and_held(tmp_path: Path) -> None:
    jobs = history_from_database(_history(tmp_path / "h.db"), days=30)
    assert len(jobs) == 7
    seg = [j for j in jobs if j.budget == "segmentation"]
    assert [j.submit for j in seg] == [0, H, 2 * H, 3 * H]
    assert all(j.work == 2 * H and j.total_gpus == 8 for j in seg)


def test_a_starved_plan_shows_when_the_budget_runs_out(tmp_path: Path) -> None:
    url = _history(tmp_path / "h.db")
    plan = tmp_path / "plan.yaml"
    plan.write_text("period: 2026-12-01\nwhy: squeeze\nbudgets:\n  - {name: segmentation, allocation: 10}\n")
    out = tmp_path / "whatif"
    result = CliRunner().invoke(
        app, ["simulate", "--plan", str(plan), "--history", url, "--config", str(SMALL), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    [seg] = [line for line in md.splitlines() if line.startswith("| segmentation |")]
    cells = [c.strip() for c in seg.strip("|").split("|")]
    assert cells[1] == "10"  # the planned allocation
    assert cells[6].startswith("2026-12-01")  # 10 credits are gone within the first day
    [det] = [line for line in md.splitlines() if line.startswith("| detection |")]
    assert det.strip("|").split("|")[6].strip() == "–"  # detection's 6,000 credits last


def test_what_if_on_a_trace(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("period: 2026-12-01\nbudgets:\n  - {name: vc-c01, allocation: 100}\n")
    out = tmp_path / "whatif"
    result = CliRunner().invoke(
        app, ["simulate", "--plan", str(plan), "--history", f"itp:{FIXTURES / 'itp'}", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert "| vc-c01 | 100 |" in md and "| vc-c02 |" in md


def test_a_plan_that_breaks_the_tree_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("period: 2026-12-01\nbudgets:\n  - {name: vc-c01, allocation: 99999999}\n")
    result = CliRunner().invoke(
        app, ["simulate", "--plan", str(plan), "--history", f"itp:{FIXTURES / 'itp'}", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert "the plan does not fit the organisation" in result.output


def test_a_plan_with_members_and_a_window_becomes_a_valid_configuration(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(
        "period: 2026-12-01\n"
        "budgets:\n"
        '  - {name: detection, allocation: "1234.5", members: [{user: dana, role: lead}, {user: eli}]}\n'
        "windows:\n"
        "  - {id: det-dec, budget: detection, cluster: lab, gpu_type: H100, gpus: 8,\n"
        "     start: 2026-12-02T00:00:00Z, end: 2026-12-03T00:00:00Z}\n"
    )
    plan = load_plan(plan_file)
    data = apply_plan(yaml.safe_load(SMALL.read_text()), plan)
    out = tmp_path / "planned.yaml"
    out.write_text(yaml.safe_dump(data))
    cfg = load_config(out)
    detection = next(b for b in cfg.budgets if b.name == "detection")
    assert str(detection.allocation) == "1234.5"
    assert [(m.user, m.role.value) for m in detection.members] == [("dana", "lead"), ("eli", "member")]
    assert [(w.id, w.gpus) for w in cfg.windows if w.budget == "detection"] == [("det-dec", 8)]
    assert period_start(plan) == 1796083200  # 2026-12-01T00:00:00Z
