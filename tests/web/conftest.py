"""Browser tests of the dashboard: a real server (tests/sdk/live.py: engine, local executor, HTTP API with open
login, SQLite) per module, and Debian's Chromium driven by Playwright (no browser is ever downloaded).

Without /usr/bin/chromium the browser tests are skipped locally and FAIL under CI=true (scripts/install-browser
installs it). Chromium writes its profile and caches under the test run's temporary folder, never into $HOME.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

from tests.sdk.live import LiveServer, live_server
from tests.web.chromium import CHROMIUM, CHROMIUM_ARGS

WAIT_MS = 30_000
"""How long a waiting assertion waits before it fails (a hang, not a speed check): the dashboard refreshes every 5 s
and the test server charges running work every 5 s."""


def require_chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    message = f"Chromium is not installed at {CHROMIUM} (run scripts/install-browser)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="session")
def playwright_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Playwright]:
    require_chromium()
    home = tmp_path_factory.mktemp("chromium-home")
    saved = {k: os.environ.get(k) for k in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    os.environ["XDG_CONFIG_HOME"], os.environ["XDG_CACHE_HOME"] = str(home / "config"), str(home / "cache")
    try:
        with sync_playwright() as pw:
            yield pw
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def browser(playwright_session: Playwright) -> Iterator[Browser]:
    launched = playwright_session.chromium.launch(executable_path=str(require_chromium()), args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("web") / "data") as server:
        yield server


@dataclass
class Dashboard:
    """One browser page on the live server, logged in (or not) as a configured user."""

    live: LiveServer
    page: Page

    def open(self, route: str = "") -> Page:
        self.page.goto(f"{self.live.url}/#{route}" if route else f"{self.live.url}/")
        return self.page

    def login(self, user: str, route: str = "") -> Page:
        """Log in through the login page with the user's API token (logging out whoever was), then go to `route`."""
        self.open()
        self.page.evaluate("localStorage.removeItem('allot.token')")
        self.page.reload()
        self.page.fill("#login-token", self.live.tokens[user])
        self.page.click("#login-submit")
        expect(self.page.locator("#me-user")).to_have_text(user, timeout=WAIT_MS)
        if route:
            self.open(route)
        return self.page

    def api(self, user: str, method: str, path: str, body: Any = None) -> httpx.Response:
        """Call the API as `user` with a bearer token, as any other client does."""
        headers = {"Authorization": f"Bearer {self.live.tokens[user]}"}
        with httpx.Client(base_url=self.live.url, timeout=30) as http:
            return http.request(method, path, json=body, headers=headers)

    def submit(self, user: str, budget: str, **spec: Any) -> str:
        response = self.api(user, "POST", "/jobs", {"spec": {"budget": budget, **spec}})
        assert response.status_code == 201, response.text
        return str(response.json()["job"]["id"])


@pytest.fixture
def dashboard(browser: Browser, live: LiveServer) -> Iterator[Dashboard]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(WAIT_MS)
    try:
        yield Dashboard(live, context.new_page())
    finally:
        context.close()
