"""The queue page: a job submitted with the real `allot` command line appears with the reason the engine recorded,
and only those who may cancel a job get the button for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import expect

from tests.sdk.live import LiveServer, wait_for
from tests.web.conftest import Dashboard

TOO_BIG = """\
name: wide-pretrain
budget: pretrain
command: [sleep, "600"]
resources: {gpus: 8, replicas: 4}
contract: {class: guaranteed, slice: 1h}
"""


def allot(live: LiveServer, user: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`allot ARGS…` as a separate process against the live server, as `user`."""
    env = {**os.environ, "ALLOT_URL": live.url, "ALLOT_TOKEN": live.tokens[user], "XDG_CONFIG_HOME": str(home)}
    env.pop("ALLOT_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "allotment.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_job_submitted_with_the_cli_appears_in_the_queue_with_its_reason(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(TOO_BIG)
    result = allot(dashboard.live, "ben", tmp_path, "submit", str(spec), "--json")
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)["job"]["id"]

    page = dashboard.login("chen", "/queue")
    row = page.locator(f"#queue-table tr[data-job='{job}']")
    expect(row.locator("[data-blocker]")).to_have_attribute("data-blocker", "limit")
    why = dashboard.api("ben", "GET", f"/jobs/{job}/why").json()
    assert why["blocker"] == "limit"
    expect(row.locator(".reason")).to_contain_text(why["message"])
    expect(row).to_contain_text("32")
    expect(page.locator("#queue-total")).to_contain_text("pending jobs")
    dashboard.api("ben", "POST", f"/jobs/{job}/cancel")


def test_the_owner_cancels_a_pending_job_from_the_queue_and_others_get_no_button(dashboard: Dashboard) -> None:
    job = dashboard.submit(
        "ben", "pretrain", name="waits", command=["sleep", "600"], resources={"gpus": 8, "replicas": 4}
    )
    page = dashboard.login("dana", "/queue")
    row = page.locator(f"#queue-table tr[data-job='{job}']")
    expect(row).to_be_visible()
    expect(row.locator("button", has_text="Cancel")).to_have_count(0)

    page = dashboard.login("ben", "/queue")
    page.on("dialog", lambda dialog: dialog.accept())
    row = page.locator(f"#queue-table tr[data-job='{job}']")
    row.locator("button", has_text="Cancel").click()
    expect(page.locator("#flash")).to_contain_text(f"Cancellation of {job} requested")
    wait_for(lambda: dashboard.api("ben", "GET", f"/jobs/{job}").json()["state"] == "cancelled", f"{job} cancelled")
    expect(page.locator(f"#queue-table tr[data-job='{job}']")).to_have_count(0)
