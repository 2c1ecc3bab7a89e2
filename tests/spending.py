"""Real spending on a live server (tests/sdk/live.py) for tests of the numbers the views show: run a job until it
has been charged, end it, and set a budget's allocation through a real budget plan so that a chosen amount remains.

Must not: write the ledger itself; every credit moves through the engine's charges or a plan's adjustment.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Any

import httpx

from tests.sdk.live import LiveServer, wait_for

MICRO = 1_000_000


def call(live: LiveServer, user: str, method: str, path: str, body: Any = None) -> Any:
    with httpx.Client(base_url=live.url, timeout=30, headers={"Authorization": f"Bearer {live.tokens[user]}"}) as h:
        response = h.request(method, path, json=body)
    assert response.status_code < 300, response.text
    return response.json()


def spend(live: LiveServer, user: str, budget: str, gpus: int = 8, replicas: int = 1, charges: int = 1) -> str:
    """Run one job on `budget` until it has been charged `charges` times, cancel it and wait for its end."""
    spec = {
        "budget": budget,
        "command": [sys.executable, "-c", "import time; time.sleep(600)"],
        "resources": {"gpus": gpus, "replicas": replicas},
        "grace": "1s",
    }
    job = str(call(live, user, "POST", "/jobs", {"spec": spec})["job"]["id"])

    def charged() -> bool:
        return len([c for c in call(live, user, "GET", f"/jobs/{job}")["charges"] if c["kind"] == "charge"]) >= charges

    wait_for(charged, f"{job} charged {charges} times", timeout=90)
    call(live, user, "POST", f"/jobs/{job}/cancel")
    wait_for(lambda: call(live, user, "GET", f"/jobs/{job}")["state"] == "cancelled", f"{job} to end")
    return job


def leave_remaining(live: LiveServer, budget: str, remaining_micro: int) -> None:
    """Apply a budget plan (as the administrator) setting `budget`'s allocation so that `remaining_micro` is left."""
    shown = call(live, "ada", "GET", f"/budgets/{budget}")
    allocation = Decimal(max(0, shown["budget"]["used_micro"] + remaining_micro)) / MICRO
    plan = {"period": shown["period"], "budgets": [{"name": budget, "allocation": str(allocation)}]}
    call(live, "ada", "POST", "/plans/apply", {"plan": plan, "why": "tests: leave a chosen balance"})
