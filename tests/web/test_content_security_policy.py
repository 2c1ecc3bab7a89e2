"""The Content-Security-Policy does not break the pages it protects: the dashboard's pages (bars sized by style
attributes, the budget chart, a report in its sandboxed frame) and the self-hosted API docs render in Chromium with
no policy violation reported but ReDoc's attempt to fetch its vendor's logo from a CDN, which the policy blocks."""

from __future__ import annotations

from playwright.sync_api import ConsoleMessage, Page, expect

from tests.web.conftest import Dashboard


def violations(page: Page) -> list[str]:
    found: list[str] = []

    def seen(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Refused to" in message.text:
            found.append(message.text)

    page.on("console", seen)
    return found


def test_the_dashboard_renders_under_its_policy(dashboard: Dashboard) -> None:
    found = violations(dashboard.page)
    page = dashboard.login("ada", "/budgets")
    expect(page.locator("#budgets")).to_contain_text("pretrain")
    dashboard.open("/budgets/pretrain")
    expect(page.locator("svg").first).to_be_visible()
    dashboard.open("/fleet")
    expect(page.locator("#view")).to_contain_text("GPUs")
    assert found == []


def test_the_api_docs_render_from_this_server(dashboard: Dashboard) -> None:
    found = violations(dashboard.page)
    page = dashboard.page
    requests: list[str] = []
    page.on("requestfinished", lambda request: requests.append(request.url))  # blocked ones fail
    page.goto(f"{dashboard.live.url}/docs")
    expect(page.locator(".swagger-ui .title").first).to_contain_text("Allotment")
    expect(page.locator(".opblock-tag-section").first).to_be_visible()
    page.goto(f"{dashboard.live.url}/redoc")
    expect(page.locator("h1").first).to_contain_text("Allotment")
    # ReDoc's bundle shows its vendor's logo from cdn.redoc.ly and hides it when that fails: the policy blocking it
    # is the point (the browser never contacts the CDN), so that one refusal is expected.
    assert [v for v in found if "https://cdn.redoc.ly/" not in v] == [], "\n".join(found)
    local = (dashboard.live.url, f"blob:{dashboard.live.url}", "data:")  # ReDoc's worker is a blob of this origin
    assert requests and [url for url in requests if not url.startswith(local)] == []
