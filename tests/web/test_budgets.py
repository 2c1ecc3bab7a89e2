"""Budget pages: the tree with allocation, used, remaining and pace, and a budget's burn-down chart, which follows
the ledger as running work is charged."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.sdk.live import wait_for
from tests.web.conftest import WAIT_MS, Dashboard

BUDGETS = ("lab", "language", "finetune", "pretrain", "vision", "detection", "segmentation")


def test_the_budget_tree_shows_every_budget_with_its_figures_and_pace(dashboard: Dashboard) -> None:
    page = dashboard.login("eli", "/budgets")
    # depth first; read in one go inside the page, which redraws the table when figures change (every 5 s)
    page.wait_for_function(
        "names => [...document.querySelectorAll('table.tree tbody tr')].map(r => r.dataset.budget).join() === names",
        arg=",".join(BUDGETS),
        timeout=WAIT_MS,
    )
    pretrain = page.locator("tr[data-budget='pretrain']")
    expect(pretrain).to_contain_text("8,000")
    expect(pretrain.locator(".bar.pace .marker")).to_have_count(1)
    page.locator("tr[data-budget='pretrain'] a").click()
    expect(page.locator("#budget")).to_have_attribute("data-budget", "pretrain")


def test_a_budgets_burn_down_updates_after_charges(dashboard: Dashboard) -> None:
    page = dashboard.login("eli", "/budgets/finetune")
    chart = page.locator("#burndown")
    expect(chart).to_be_visible()
    before = int(chart.get_attribute("data-remaining-micro") or "")
    shown = dashboard.api("eli", "GET", "/budgets/finetune").json()["budget"]
    assert before == shown["remaining_micro"]
    expect(page.locator("#charges")).not_to_contain_text("charge ")

    job = dashboard.submit("eli", "finetune", command=["sleep", "300"], resources={"gpus": 8})
    wait_for(lambda: dashboard.api("eli", "GET", f"/jobs/{job}").json()["charged_micro"] > 0, f"{job} charged")
    page.wait_for_function(
        "before => Number(document.querySelector('#burndown')?.dataset.remainingMicro) < before",
        arg=before,
        timeout=WAIT_MS,
    )
    after = int(chart.get_attribute("data-remaining-micro") or "")
    used = int(page.locator("#fig-used .big").get_attribute("data-micro") or "")
    assert before - after == used > 0
    expect(page.locator("#charges")).to_contain_text(job)
    assert chart.locator("path.actual").count() == 1
    dashboard.api("eli", "POST", f"/jobs/{job}/cancel")
