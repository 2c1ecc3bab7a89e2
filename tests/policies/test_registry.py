"""The baseline registry: the names the simulator relies on, and a clear error for an unknown one."""

from __future__ import annotations

import pytest

from allotment.policies import make_policy, policy_names


def test_the_five_baselines_are_known_by_name() -> None:
    assert policy_names() == ("fifo", "fifo-strict", "priority", "slurm", "kueue")
    assert [make_policy(n).name for n in policy_names()] == list(policy_names())


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown baseline policy 'lottery'; known: fifo, fifo-strict, priority"):
        make_policy("lottery")
