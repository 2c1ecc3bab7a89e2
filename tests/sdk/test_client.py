"""The Python SDK against a real server: every kind of endpoint, typed answers, ApiError with problems, pagination,
following logs, waiting for sessions, and the configuration it reads (ALLOT_URL / ALLOT_TOKEN / config file)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from allotment.sdk import ApiError, Client, models, resolve, write_config
from tests.sdk.live import ROOT, LiveServer, wait_for

PY = sys.executable


@pytest.fixture
def ben(live: LiveServer) -> Iterator[Client]:
    with Client(live.url, live.tokens["ben"]) as client:
        yield client


@pytest.fixture
def ada(live: LiveServer) -> Iterator[Client]:
    with Client(live.url, live.tokens["ada"]) as client:
        yield client


def finished(client: Client, job_id: str) -> models.JobDetail:
    wait_for(lambda: client.job(job_id).state in ("completed", "failed", "cancelled"), f"{job_id} to end")
    return client.job(job_id)


def test_submit_yaml_run_and_read_everything_about_the_job(ben: Client) -> None:
    spec = f"""\
name: counts
budget: pretrain
command: [{PY}, -c, "import time; time.sleep(1.5); [print('line', i) for i in range(3)]"]
resources: {{gpus: 1}}
"""
    submitted = ben.submit(yaml=spec, request_id="sdk-counts")
    assert submitted.created and submitted.job.name == "counts" and submitted.job.user == "ben"
    again = ben.submit(yaml=spec, request_id="sdk-counts")
    assert not again.created and again.job.id == submitted.job.id
    detail = finished(ben, submitted.job.id)
    assert detail.state == "completed"
    assert [e.to_state for e in detail.history][:2] == ["pending", "running"]
    assert detail.runs and detail.runs[0].exit_code == 0 and detail.runs[0].nodes
    assert detail.slices and detail.charged_micro > 0
    assert any(c.kind == "charge" for c in detail.charges)
    text = "".join(chunk.data for chunk in ben.follow_logs(detail.id))
    assert text.splitlines() == ["line 0", "line 1", "line 2"]
    partial = ben.logs(detail.id, offset=5)
    assert partial.data == "\n".join(["line 0", "line 1", "line 2"])[5:] + "\n" and partial.complete


def test_problems_of_a_bad_spec_carry_field_and_line(ben: Client) -> None:
    with pytest.raises(ApiError) as caught:
        ben.submit(yaml="name: x\nbudget: pretrain\ncommand: [true]\nresources:\n  gpu: 2\n")
    error = caught.value
    assert error.status == 422 and error.error == "invalid" and error.is_bad_input
    [problem] = [p for p in error.problems if p.field == "resources.gpu"]
    assert problem.line == 5 and "gpus" in problem.reason


def test_identity_tokens_and_rights(live: LiveServer, ben: Client, ada: Client) -> None:
    me = ben.me()
    assert me.user == "ben" and me.roles["pretrain"] == "member" and not me.admin
    assert ada.me().admin
    issued = ben.create_token("ben", name="laptop", ttl="1h")
    assert issued.secret.startswith("allot_") and issued.token.user == "ben"
    assert issued.token.id in {t.id for t in ben.tokens()}
    with Client(live.url, issued.secret) as laptop:
        assert laptop.me().user == "ben"
        assert ben.revoke_token(issued.token.id).revoked_at is not None
        with pytest.raises(ApiError) as revoked:
            laptop.me()
        assert revoked.value.status == 401
    with pytest.raises(ApiError) as forbidden:
        ben.create_token("dana")
    assert forbidden.value.status == 403 and not forbidden.value.is_bad_input
    assert ada.login("dana").token.user == "dana"  # an administrator logs anyone in
    assert ben.health().database


def test_queue_pages_and_filters(ben: Client) -> None:
    ids = [ben.submit({"name": f"page-{i}", "budget": "finetune", "command": ["true"]}).job.id for i in range(3)]
    first = ben.jobs(budget="finetune", user="ben", limit=2)
    assert len(first.items) == 2 and first.next_cursor is not None
    rest = ben.jobs(budget="finetune", user="ben", limit=2, cursor=first.next_cursor)
    paged = [j.id for j in first.items + rest.items]
    assert len(paged) == len(set(paged)) and set(ids) <= set(paged)
    everything = list(ben.iter_jobs(budget="finetune", page_size=1))
    assert set(ids) <= {j.id for j in everything}
    assert all(j.budget == "finetune" for j in everything)
    for job_id in ids:
        finished(ben, job_id)
    done = ben.jobs(state=["completed", "failed"], budget="finetune")
    assert set(ids) <= {j.id for j in done.items}


def test_why_then_cancel_a_job_that_cannot_start_now(ben: Client) -> None:
    # 32 GPUs: more than pretrain's limit of 24, so it waits whatever else runs
    job = ben.submit({"name": "too-big", "budget": "pretrain", "command": ["sleep", "600"],
                      "resources": {"gpus": 8, "replicas": 4}}).job  # fmt: skip
    wait_for(lambda: ben.why(job.id).blocker is not None, "the engine's reason")
    why = ben.why(job.id)
    assert why.state == "pending" and why.needed_gpus == 32 and "limit of 24" in why.message
    assert why.standing.budget == "pretrain" and why.standing.allocation_micro == 8000 * models.MICRO
    assert ben.cancel(job.id).cancel_requested_at is not None
    assert finished(ben, job.id).state == "cancelled"
    with pytest.raises(ApiError) as not_pending:
        ben.why(job.id)
    assert not_pending.value.status == 404


def test_session_request_wait_and_release(live: LiveServer) -> None:
    with Client(live.url, live.tokens["eli"]) as eli:
        requested = eli.request_session("segmentation", gpus=2, length="15m", name="nb")
        assert requested.job.kind == "session"
        ready = eli.wait_session(requested.job.id, timeout=60)
        assert ready.ready and ready.ends_at is not None
        [attach] = ready.attach
        assert len(attach.gpus) == 2 and attach.env["ALLOT_JOB_ID"] == requested.job.id
        assert eli.release_session(requested.job.id).cancel_requested_at is not None
        wait_for(lambda: eli.session(requested.job.id).job.state == "cancelled", "the session to end")
        assert not eli.session(requested.job.id).ready


def test_budgets_plans_nodes_and_reports(live: LiveServer, ada: Client) -> None:
    tree = ada.budgets()
    lab = tree.get("lab")
    assert lab is not None and lab.depth == 0 and not lab.leaf
    assert [b.name for b in ada.budgets("vision").budgets] == ["vision", "detection", "segmentation"]
    detail = ada.budget("pretrain")
    assert detail.forecast.window == 86_400 and detail.forecast.outcome in ("lasts_period", "runs_out")
    assert detail.budget.max_gpus == 24 and {m.user for m in detail.members} == {"ben", "chen"}
    assert {m.user for m in ada.members("detection")} == {"dana", "eli"}
    plan = {"period": tree.period, "budgets": [{"name": "segmentation", "allocation": 3500}]}
    diff = ada.plan_diff(plan=plan)
    assert [(c.target, c.field, c.new) for c in diff.changes] == [("segmentation", "allocation", 3500 * models.MICRO)]
    applied = ada.plan_apply(plan=plan, why="sdk test")
    assert applied.actor == "ada" and applied.audit_id > 0
    assert ada.plan_diff(plan=plan).changes == []
    nodes = ada.nodes(cluster="lab")
    assert len(nodes) == 4 and all(n.gpus == 8 for n in nodes)
    with Client(live.url, live.tokens["fay"]) as fay:
        assert fay.cordon("lab-h100-0002", "test").state == "cordoned"
        drained = fay.drain("lab-h100-0002", "ECC")
        assert drained.node.state == "draining" and drained.empty_by > 0
        assert fay.resume("lab-h100-0002").state == "ready"
        with pytest.raises(ApiError) as forced:
            fay.force_drain("lab-h100-0002")
        assert forced.value.status == 403
    report = ada.usage(budget="lab")
    assert report.periods == [tree.period]


def test_failures_without_a_server_or_a_token(live: LiveServer) -> None:
    with Client("http://127.0.0.1:9") as nowhere, pytest.raises(ApiError) as unreachable:
        nowhere.me()
    assert unreachable.value.status == 0 and unreachable.value.error == "unreachable"
    with Client(live.url) as anonymous, pytest.raises(ApiError) as anon:
        anonymous.jobs()
    assert anon.value.status == 401 and anon.value.error == "unauthenticated"
    with pytest.raises(ValueError):
        Client(live.url).submit()


def test_settings_come_from_arguments_environment_then_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("ALLOT_CONFIG", raising=False)
    monkeypatch.delenv("ALLOT_URL", raising=False)
    monkeypatch.delenv("ALLOT_TOKEN", raising=False)
    assert resolve().token is None and resolve().url == "http://127.0.0.1:8642"
    path = write_config("http://server:1", "allot_file", "ben")
    assert path == tmp_path / "allot" / "config.toml"
    assert path.stat().st_mode & 0o777 == 0o600
    from_file = resolve()
    assert (from_file.url, from_file.token, from_file.user) == ("http://server:1", "allot_file", "ben")
    monkeypatch.setenv("ALLOT_TOKEN", "allot_env")
    assert resolve().token == "allot_env"
    assert resolve(token="allot_arg").token == "allot_arg"
    monkeypatch.delenv("ALLOT_TOKEN")
    monkeypatch.setenv("ALLOT_URL", "http://elsewhere:2")
    assert resolve().token is None  # the file's token belongs to the file's server
    path.write_text("url = [unclosed", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid TOML"):
        resolve()


def test_models_mirror_the_api_views() -> None:
    """Every field the server's views publish exists in the SDK's model of the same answer."""
    from allotment.service import dashboard_views, views

    pairs: dict[type[BaseModel], type[BaseModel]] = {
        views.JobSummary: models.JobSummary, views.JobDetail: models.JobDetail, views.JobEvent: models.JobEvent,
        views.RunView: models.Run, views.SliceView: models.Slice, views.ChargeView: models.Charge,
        views.Submitted: models.Submitted, views.JobPage: models.JobPage, views.LogChunk: models.LogChunk,
        views.Hint: models.Hint, views.Standing: models.Standing, views.WhyView: models.Why,
        views.AttachInfo: models.AttachInfo, views.SessionView: models.Session, views.BudgetNode: models.BudgetNode,
        views.BudgetTree: models.BudgetTree, views.MemberView: models.Member, views.WindowView: models.Window,
        views.ForecastView: models.Forecast, views.BudgetDetail: models.BudgetDetail,
        views.PlanChange: models.PlanChange,
        views.PlanDiff: models.PlanDiff, views.PlanApplied: models.PlanApplied, views.NodeJob: models.NodeJob,
        views.NodeView: models.Node, views.DrainView: models.Drain, views.UsageRow: models.UsageRow,
        views.UsageReport: models.UsageReport, views.TokenView: models.Token, views.NewToken: models.NewToken,
        views.Me: models.Me, views.RunOutlook: models.RunOutlook, views.HistoryEntry: models.HistoryEntry,
        views.HistoryPage: models.HistoryPage,
        views.SessionRoomView: models.SessionRoom, views.ChargeLine: models.ChargeLine,
        views.FieldChange: models.FieldChange, views.JobUpdated: models.JobUpdated,
        views.ArrayInfo: models.ArrayInfo, views.ArrayView: models.ArrayView, views.ArrayControl: models.ArrayControl,
    }  # fmt: skip
    published = {v for v in vars(views).values() if isinstance(v, type) and issubclass(v, views.View)}
    assert published - {views.View} == set(pairs)
    from allotment.service.charges import ChargeLinePage

    pairs |= {
        ChargeLinePage: models.ChargeLinePage,
        dashboard_views.QueuedJob: models.QueuedJob,
        dashboard_views.QueuePage: models.QueuePage,
    }  # GET /jobs/queue
    for view, model in pairs.items():
        assert set(view.model_fields) == set(model.model_fields), view.__name__


def test_the_sdk_imports_without_the_server() -> None:
    """Of the server's packages the SDK may import only the job states (allotment.core.jobstate: the standard
    library and nothing else), the one place they are defined."""
    code = (
        "import sys, allotment.sdk\n"
        "allowed = {'allotment.core', 'allotment.core.jobstate'}\n"
        "bad = [m for m in sys.modules if m not in allowed and m.split('.')[:2] in (['allotment', p] for p in "
        "('api', 'service', 'store', 'engine', 'executors', 'core'))]\n"
        "assert not bad, bad"
    )
    subprocess.run([PY, "-c", code], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def test_limits_and_impossible_jobs_come_back_as_typed_errors(ben: Client) -> None:
    with pytest.raises(ApiError) as too_large:
        ben.submit(yaml="budget: pretrain\ncommand: [x]\n#" + "x" * (2 << 20))
    assert (too_large.value.status, too_large.value.error) == (413, "too_large") and too_large.value.is_bad_input
    assert "limit of 1048576 bytes" in too_large.value.message
    with pytest.raises(ApiError) as impossible:
        ben.submit({"budget": "pretrain", "command": ["x"], "resources": {"gpus": 9}})
    [problem] = impossible.value.problems
    assert problem.field == "resources.gpus" and "the largest job this fleet can hold" in problem.reason
    with pytest.raises(ApiError) as nowhere:
        ben.request("GET", "/no/such/endpoint")
    assert (nowhere.value.status, nowhere.value.error) == (404, "not_found") and "/docs" in nowhere.value.message
