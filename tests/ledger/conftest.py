"""Shared values for the pure ledger tests: rates, a fixed epoch and policy prices."""

from __future__ import annotations

import pytest

from allotment.core.model import PolicyConfig

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
H100 = 1_000_000
B200 = 1_600_000


@pytest.fixture
def policy() -> PolicyConfig:
    return PolicyConfig(opportunistic_price=400, session_price=1000)
