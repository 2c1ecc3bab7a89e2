"""Simulation reports: what the simulator wrote under `<data_dir>/reports` is listed and shown read-only (HTML in a
sandboxed frame, Markdown as text)."""

from __future__ import annotations

import base64

from playwright.sync_api import expect

from tests.web.conftest import Dashboard

HTML = (
    "<html><body><h1 id='title'>FIFO against Allotment</h1><p>p95 wait 3h → 20m</p>"
    "<figure><img id='plot' src='waits.png' alt='Mean wait by class'></figure></body></html>"
)
PNG = base64.b64decode(  # a 1×1 image, as the simulator's plots are PNG files beside the report
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
MARKDOWN = "# FIFO against Allotment\n\n| policy | p95 wait |\n|---|---|\n| fifo | 3h |\n"


def test_simulation_reports_are_listed_and_shown(dashboard: Dashboard) -> None:
    folder = dashboard.live.data_dir / "reports" / "fifo-vs-allotment"
    folder.mkdir(parents=True)
    (folder / "report.html").write_text(HTML)
    (folder / "report.md").write_text(MARKDOWN)
    (folder / "waits.png").write_bytes(PNG)
    (folder / "notes.txt").write_text("not a report")

    page = dashboard.login("eli", "/reports")
    row = page.locator("tr[data-report='fifo-vs-allotment']")
    expect(row).to_contain_text("report.html")
    expect(row).not_to_contain_text("notes.txt")
    row.locator("a", has_text="report.html").click()
    frame = page.frame_locator("#report-frame")
    expect(frame.locator("#title")).to_have_text("FIFO against Allotment")
    assert page.locator("#report-frame").get_attribute("sandbox") == "allow-scripts"
    plot = frame.locator("#plot")
    expect(plot).to_have_attribute("src", f"data:image/png;base64,{base64.b64encode(PNG).decode()}")
    assert plot.evaluate("img => img.complete && img.naturalWidth") == 1

    page.go_back()
    page.locator("tr[data-report='fifo-vs-allotment'] a", has_text="report.md").click()
    expect(page.locator("#report-text")).to_contain_text("| fifo | 3h |")
