"""Logging in to the dashboard: the login page takes an API token (or, on an open-login server, a user name), keeps
it in the browser until logout, and the API's own bearer authentication is unchanged."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.sdk.live import LiveServer
from tests.web.conftest import Dashboard


def test_logging_in_with_a_token_shows_who_is_logged_in_until_logout(dashboard: Dashboard) -> None:
    page = dashboard.open()
    expect(page.locator("#login-form")).to_be_visible()
    expect(page.locator("#nav")).to_be_hidden()
    dashboard.login("fay")
    expect(page.locator("#who")).to_contain_text("operator")
    expect(page.locator("#card-fleet")).to_contain_text("of 32 GPUs in use")
    page.reload()
    expect(page.locator("#me-user")).to_have_text("fay")
    page.click("#logout")
    expect(page.locator("#login-form")).to_be_visible()
    assert page.evaluate("localStorage.getItem('allot.token')") is None


def test_a_token_the_server_does_not_know_is_refused(dashboard: Dashboard) -> None:
    page = dashboard.open()
    page.fill("#login-token", "allot_not-a-real-token")
    page.click("#login-submit")
    expect(page.locator("#login-error")).to_contain_text("not valid")
    expect(page.locator("#nav")).to_be_hidden()


def test_an_open_login_server_logs_in_by_user_name(dashboard: Dashboard) -> None:
    page = dashboard.open()
    page.click("details summary")
    page.fill("#login-user", "dana")
    page.click("#login-submit")
    expect(page.locator("#me-user")).to_have_text("dana")
    expect(page.locator("#who")).to_contain_text("lead of vision")


def test_the_page_needs_no_token_but_the_api_keeps_its_bearer_authentication(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        page = http.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert all(
            http.get(f"/ui/{asset}").status_code == 200 for asset in ("lib.js", "pages.js", "app.js", "style.css")
        )
        assert http.get("/dashboard/overview").status_code == 401
        assert http.get("/jobs").status_code == 401
        bearer = {"Authorization": f"Bearer {live.tokens['eli']}"}
        assert http.get("/dashboard/overview", headers=bearer).status_code == 200
        assert http.get("/jobs", headers=bearer).status_code == 200
