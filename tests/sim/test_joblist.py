"""Job lists (any trace as a CSV file, replayed without code) and what a bad trace or job list gets: a message that
names the file, line and column and the fix, exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from allotment.cli.main import app
from allotment.config.gpus import GpuRule
from allotment.sim.joblist import job_list_workload
from allotment.sim.traces import Replay, TraceError

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "small" / "allotment.yaml"
HEADER = "id,submit,budget,user,gpus,duration,deadline,max_runtime,kind,gpu_types\n"


class JobList:
    """A job list written row by row (a small fluent builder of test input)."""

    def __init__(self, header: str = HEADER) -> None:
        self.text = header

    def row(self, *cells: object) -> JobList:
        self.text += ",".join("" if c is None else str(c) for c in cells) + "\n"
        return self

    def write(self, path: Path) -> Path:
        path.write_text(self.text)
        return path


def _simulate(tmp_path: Path, trace: str) -> tuple[int, str]:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: list\nworkload:\n  trace: {trace}\n")
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--out", str(tmp_path / "out")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, " ".join(result.output.split())


def test_a_job_list_is_replayed_with_its_limits_types_and_deadlines(tmp_path: Path) -> None:
    jobs = (
        JobList()
        .row("a", 0, "pretrain", "ben", 8, 3600, 7200, None, None, "H100")
        .row("b", 60, "pretrain", "ben", 16, 1800, None, 900, None, None)
        .row("c", 120, "detection", "dana", 1, 600, 30, None, "session", None)
        .write(tmp_path / "jobs.csv")
    )
    workload = job_list_workload(jobs, tmp_path, Replay(drain_days=0.2), organisation_file=SMALL)
    by_id = {j.id: j for j in workload.jobs}
    assert (by_id["a"].gpu_types, by_id["a"].deadline) == (("H100",), 7200)
    assert (by_id["b"].gpus, by_id["b"].replicas, by_id["b"].max_runtime) == (8, 2, 900)
    assert by_id["c"].cls == "session" and by_id["c"].deadline == 150
    code, out = _simulate(tmp_path, f"{{kind: csv, path: jobs.csv, organisation: {SMALL}, drain_days: 0.2}}")
    assert code == 0, out
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| deadlines met | 1 / 2 |" in md  # a's hour fits in its two; c's 600 s of work cannot end within 30 s


def test_without_an_organisation_one_is_generated_from_the_budgets_named(tmp_path: Path) -> None:
    jobs = JobList().row("a", 0, "alpha", None, 4, 600, None, None, None, None).write(tmp_path / "jobs.csv")
    workload = job_list_workload(jobs, tmp_path)
    assert workload.jobs[0].budget == "alpha" and workload.jobs[0].user == "u-alpha"
    assert "alpha" in workload.config.read_text()


def test_fractional_gpus_round_up_only_when_the_scenario_asks(tmp_path: Path) -> None:
    jobs = JobList().row("a", 0, "alpha", None, "0.5", 600, None, None, None, None).write(tmp_path / "jobs.csv")
    with pytest.raises(TraceError, match="fractional GPUs are not supported"):
        job_list_workload(jobs, tmp_path)
    assert job_list_workload(jobs, tmp_path, Replay(gpu_rule=GpuRule.ROUND_UP)).jobs[0].gpus == 1


BAD = [
    pytest.param("{kind: csv, path: missing.csv}", None, "missing.csv: no such file", id="missing-file"),
    pytest.param(
        "{kind: csv, path: jobs.csv}", "submit,budget,duration\n0,a,60\n", "missing column(s) gpus", id="column"
    ),
    pytest.param(
        "{kind: csv, path: jobs.csv}",
        "submit,budget,gpus,duration\n0,a,two,60\n",
        "jobs.csv:2: column gpus",
        id="not-a-number",
    ),
    pytest.param(
        "{kind: csv, path: jobs.csv}", "submit,budget,gpus,duration\n0,a,0,60\n", "CPU-only work (0 GPUs)", id="zero"
    ),
    pytest.param(
        "{kind: csv, path: jobs.csv}",
        "submit,budget,gpus,duration\n0,a,1,60\n2026-01-01,a,1,60\n",
        "mixes seconds (line 2) and timestamps (line 3)",
        id="mixed-times",
    ),
    pytest.param(
        "{kind: csv, path: jobs.csv, skip_days: 5}",
        "submit,budget,gpus,duration\n0,a,1,60\n",
        "no jobs submitted in the chosen window",
        id="empty-window",
    ),
    pytest.param(
        f"{{kind: csv, path: jobs.csv, organisation: {SMALL}}}",
        "submit,budget,gpus,duration\n0,nobody,1,60\n",
        "budget 'nobody' (job r0000002) is not in the organisation",
        id="unknown-budget",
    ),
    pytest.param(
        "{kind: csv, path: jobs.csv}",
        "submit,budget,gpus,duration,gpu_types\n0,a,1,60,B300\n",
        "asks for GPU type 'B300', which the fleet has none of",
        id="unknown-gpu-type",
    ),
    pytest.param("{kind: philly, path: .}", None, "is a folder; give the file itself", id="philly-folder"),
    pytest.param("{kind: itp, path: s.yaml}", None, "is a file: the ITP trace is a folder", id="itp-file"),
    pytest.param(
        "{kind: philly, path: jobs.csv}",
        "a,b\n1,2\n",
        "missing column(s) timestamp, duration, num_gpus",
        id="not-philly",
    ),
    pytest.param("{kind: swf, path: jobs.csv}", "", "trace.kind", id="unknown-kind"),
]


@pytest.mark.parametrize(("trace", "content", "says"), BAD)
def test_bad_input_says_where_and_what_to_do_and_exits_2(
    tmp_path: Path, trace: str, content: str | None, says: str
) -> None:
    if content is not None:
        (tmp_path / "jobs.csv").write_text(content)
    code, out = _simulate(tmp_path, trace)
    assert code == 2, out
    assert says in out
    assert "Traceback" not in out


def test_fixed_nodes_put_each_budget_alone_on_its_own_or_all_in_one_pool(tmp_path: Path) -> None:
    jobs = (
        JobList()
        .row("a", 0, "alpha", None, 8, 600, None, None, None, None)
        .row("b", 0, "beta", None, 16, 600, None, None, None, None)
        .write(tmp_path / "jobs.csv")
    )
    alone = job_list_workload(jobs, tmp_path / "alone", Replay(nodes={"alpha": 1, "beta": 2}))
    assert {j.id: j.clusters for j in alone.jobs} == {"a": ("csv-alpha",), "b": ("csv-beta",)}
    assert "each budget alone on its fixed nodes" in alone.notes[1] and "24 GPUs" in alone.notes[1]
    shared = job_list_workload(jobs, tmp_path / "shared", Replay(nodes={"alpha": 1, "beta": 2}, shared=True))
    assert all(j.clusters == () for j in shared.jobs) and "shared" in shared.notes[1]
    with pytest.raises(TraceError, match="missing beta"):
        job_list_workload(jobs, tmp_path / "x", Replay(nodes={"alpha": 1}))
    with pytest.raises(TraceError, match="beta has a job of 16 GPUs, more than its 8 GPUs alone"):
        job_list_workload(jobs, tmp_path / "y", Replay(nodes={"alpha": 1, "beta": 1}))


def test_an_itp_replay_with_fixed_nodes_runs(tmp_path: Path) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "itp"
    code, out = _simulate(
        tmp_path, f"{{kind: itp, path: {fixtures}, nodes: {{vc-c01: 2, vc-c02: 1}}, drain_days: 0.1}}"
    )
    assert code == 0, out
    assert "each budget alone on its fixed nodes" in (tmp_path / "out" / "report.md").read_text()


DATED = "submit,budget,gpus,duration\n2026-01-01 00:00,a,1,60\n2026-01-02 12:00,a,1,60\n2026-01-03 06:00,a,1,60\n"


@pytest.mark.parametrize(
    ("window", "jobs"),
    [
        pytest.param("from: 2026-01-02, to: 2026-01-03", 1, id="dates"),
        pytest.param("from: 1d", 2, id="offset-to-the-end"),
        pytest.param("to: 36h", 1, id="offset-end"),
        pytest.param("from: '2026-01-02 12:00', to: 3d", 2, id="date-and-offset"),
    ],
)
def test_a_date_window_picks_the_jobs_submitted_in_it(tmp_path: Path, window: str, jobs: int) -> None:
    (tmp_path / "jobs.csv").write_text(DATED)
    code, out = _simulate(tmp_path, f"{{kind: csv, path: jobs.csv, {window}, drain_days: 0.1}}")
    assert code == 0, out
    assert f"job list: {jobs} jobs" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize(
    ("window", "says"),
    [
        pytest.param("from: 2026-01-03, to: 2026-01-02", "is not after from", id="backwards"),
        pytest.param("from: 2025-12-01", "before the trace's first submission", id="before"),
        pytest.param("from: soon", "neither an offset (7d, 36h) nor a date", id="word"),
        pytest.param("from: 1d, days: 1", "not both", id="both-forms"),
    ],
)
def test_a_bad_date_window_is_refused(tmp_path: Path, window: str, says: str) -> None:
    (tmp_path / "jobs.csv").write_text(DATED)
    code, out = _simulate(tmp_path, f"{{kind: csv, path: jobs.csv, {window}}}")
    assert code == 2 and says in out, out


def test_a_trace_without_dates_takes_offsets_only(tmp_path: Path) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "itp"
    code, out = _simulate(tmp_path, f"{{kind: itp, path: {fixtures}, from: 2021-01-01}}")
    assert code == 2 and "has no dates (its times start at 0): give an offset such as 7d" in out
