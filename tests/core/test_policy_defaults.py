"""The policy's defaults for what a job or session leaves out: default_slice clamped to [min_slice, max_slice]
(sessions: at most session_max_length), default_grace capped at max_grace (core.model.PolicyConfig)."""

from __future__ import annotations

import pytest

from allotment.core.model import PolicyConfig


@pytest.mark.parametrize(
    ("policy", "slice_", "grace", "session"),
    [
        pytest.param(PolicyConfig(), 3600, 60, 3600, id="built-in"),
        pytest.param(PolicyConfig(min_slice=30, max_slice=600, max_grace=30), 600, 30, 3600, id="the-demo"),
        pytest.param(PolicyConfig(min_slice=7200, max_slice=8 * 3600), 7200, 60, 3600, id="raised-to-min-slice"),
        pytest.param(PolicyConfig(max_grace=10, session_max_length=900), 3600, 10, 900, id="short-limits"),
        pytest.param(
            PolicyConfig(default_slice=1800, default_grace=5, min_slice=600), 1800, 5, 1800, id="configured-defaults"
        ),
    ],
)
def test_defaults_fit_the_limits(policy: PolicyConfig, slice_: int, grace: int, session: int) -> None:
    assert (policy.default_slice_of, policy.default_grace_of, policy.default_session_length) == (slice_, grace, session)
