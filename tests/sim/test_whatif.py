"""What-if budgeting: a budget plan replayed over a recorded history (an Allotment database, or a trace)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import yaml
from typer.testing import CliRunner

from allotment.cli.main import app
from allotment.config import load_config
from allotment.core.cycle import AllotmentPolicy
from allotment.sim.runner import SimOptions, Simulation
from allotment.sim.whatif import apply_plan, history_from_database, load_plan, period_start
from allotment.sim.workload import SimJob, Workload
from tests.sim.builders import sim_job

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
FIXTURES = Path(__file__).parent / "fixtures"
H = 3600


def _record(db: Path, jobs: list[SimJob], hours: int) -> str:
    """Record a history in an Allotment database by running `jobs` through the engine on the SQL store."""
    url = f"sqlite:///{db}"
    options = SimOptions(store="sqlite", database_url=url)
    Simulation(Workload("history", SMALL, tuple(jobs), hours * H), AllotmentPolicy(), options).run()
    return url


def _history(db: Path) -> str:
    """A small history: segmentation's four 2-hour jobs and detection's three 1-hour ones."""
    jobs = [
        *(sim_job(f"seg{i}", submit=i * H, budget="segmentation", user="eli", work=2 * H) for i in range(4)),
        *(sim_job(f"det{i}", submit=i * H, budget="detection", user="dana", work=H) for i in range(3)),
    ]
    return _record(db, jobs, 12)


def _cells(md: str, budget: str) -> list[str]:
    [row] = [line for line in md.splitlines() if line.startswith(f"| {budget} |")]
    return [c.strip() for c in row.strip("|").split("|")]


def _contended(db: Path) -> str:
    """A history in which finetune (under language) and detection (under vision) compete for the whole fleet."""
    jobs = [
        *(sim_job(f"ft{i}", submit=i * 300, budget="finetune", user="chen", work=H) for i in range(60)),
        *(sim_job(f"det{i}", submit=i * 300, budget="detection", user="dana", work=H) for i in range(60)),
    ]
    return _record(db, jobs, 30)


def _what_if(tmp_path: Path, plan_text: str, history: str, *extra: str) -> tuple[int, str, Path]:
    plan, out = tmp_path / "plan.yaml", tmp_path / "whatif"
    plan.write_text(plan_text)
    args = ["simulate", "--plan", str(plan), "--history", history, "--config", str(SMALL), "--out", str(out), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, " ".join(result.output.split()), out


def test_halving_a_contended_budget_lowers_its_expected_share(tmp_path: Path) -> None:
    url = _contended(tmp_path / "h.db")
    plan = (
        "period: 2026-12-01\nbudgets:\n  - {name: language, allocation: 6500}\n"
        "  - {name: pretrain, allocation: 4000}\n  - {name: finetune, allocation: 2500}\n"
    )
    code, out, report = _what_if(tmp_path, plan, url)
    assert code == 0, out
    cells = _cells((report / "report.md").read_text(), "finetune")
    before, after = (float(x.strip(" %")) for x in cells[2].split("→"))
    assert after < before  # language's weight halved: finetune gets less of the contended fleet
    assert cells[3].startswith("-")


def _dump(db: Path) -> list[str]:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return list(conn.iterdump())


def test_the_history_database_is_read_and_never_changed(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    url = _contended(db)
    file_before, rows_before = db.read_bytes(), _dump(db)
    code, out, _ = _what_if(tmp_path, "period: 2026-12-01\nbudgets:\n  - {name: detection, allocation: 10}\n", url)
    assert code == 0, out
    assert db.read_bytes() == file_before and _dump(db) == rows_before
    wal = tmp_path / "h.db-wal"  # a reader of a WAL database may create it (and -shm, the index), never write to it
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_history_that_does_not_exist_is_refused_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    code, out, _ = _what_if(tmp_path, "period: 2026-12-01\nbudgets:\n  - {name: detection, allocation: 10}\n",
                            f"sqlite:///{missing}")  # fmt: skip
    assert code == 2 and "no such database file" in out
    assert not missing.exists()


def test_a_span_of_no_days_is_refused(tmp_path: Path) -> None:
    for days in ("0", "-1"):
        code, out, _ = _what_if(
            tmp_path, "period: 2026-12-01\nbudgets:\n  - {name: vc-c01, allocation: 1}\n",
            f"itp:{FIXTURES / 'itp'}", "--days", days,
        )  # fmt: skip
        assert code == 2 and "give a number of days above 0" in out, out


def test_a_budget_under_a_leaf_is_refused_with_its_line(tmp_path: Path) -> None:
    plan = "period: 2026-12-01\nbudgets:\n  - {name: newbie, parent: detection, allocation: 10}\n"
    code, out, _ = _what_if(tmp_path, plan, f"itp:{FIXTURES / 'itp'}")
    assert code == 2, out


def test_a_trace_path_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    plan = "period: 2026-12-01\nbudgets:\n  - {name: vc-c01, allocation: 1}\n"
    code, out, _ = _what_if(tmp_path, plan, f"itp:{SMALL}")
    assert code == 2 and "the ITP trace is a folder" in out
    code, out, _ = _what_if(tmp_path, plan, f"philly:{FIXTURES}")
    assert code == 2 and "is a folder; give the file itself" in out


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
    cells = _cells(md, "segmentation")
    assert cells[1] == "4,000 → 10"  # the current and the planned allocation
    assert cells[7].startswith("2026-12-01")  # 10 credits are gone within the first day
    assert _cells(md, "detection")[7] == "–"  # detection's 6,000 credits last


def test_what_if_on_a_trace(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("period: 2026-12-01\nbudgets:\n  - {name: vc-c01, allocation: 100}\n")
    out = tmp_path / "whatif"
    result = CliRunner().invoke(
        app, ["simulate", "--plan", str(plan), "--history", f"itp:{FIXTURES / 'itp'}", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert _cells(md, "vc-c01")[1].endswith("→ 100") and _cells(md, "vc-c02")


def test_a_plan_that_breaks_the_tree_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("period: 2026-12-01\nbudgets:\n  - {name: vc-c01, allocation: 99999999}\n")
    result = CliRunner().invoke(
        app, ["simulate", "--plan", str(plan), "--history", f"itp:{FIXTURES / 'itp'}", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "the budget plan is invalid: line 3: budgets[0].allocation" in out  # the server's own check and line
    assert "would get 100001336 credits, more than its 11520" in out  # exact credits, not 1e+08


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


def test_the_budgets_of_a_history_are_listed_to_plan_against() -> None:
    result = CliRunner().invoke(app, ["simulate", "--history", f"itp:{FIXTURES / 'itp'}", "--budgets"])
    assert result.exit_code == 0, result.output
    assert "vc-c01" in result.output and "vc-c02" in result.output


def test_the_report_plots_each_budgets_balance_under_both_plans(tmp_path: Path) -> None:
    url = _contended(tmp_path / "h.db")
    code, out, report = _what_if(tmp_path, "period: 2026-12-01\nbudgets:\n  - {name: detection, allocation: 10}\n", url)
    assert code == 0, out
    assert (report / "burn-down.png").read_bytes()[:4] == b"\x89PNG"
    assert "burn-down.png" in (report / "report.md").read_text()
