"""Baseline scheduling policies, run through the same engine as Allotment's own policy (docs/baselines.md).

Owns: the registry of baselines by name — `make_policy(name)` and `policy_names()`. Each baseline is a pure,
deterministic `Policy` (allotment.core.policy) built from the core's placement, capacity and decision types.

Must not: import anything but allotment.core and itself (pyproject's import contracts); read a clock, do I/O or draw
random numbers.
"""

from __future__ import annotations

from collections.abc import Callable

from allotment.core.policy import Policy
from allotment.policies.fifo import FifoBackfill, StrictFifo
from allotment.policies.kueue import KueueFairSharing
from allotment.policies.priority import OldPriority
from allotment.policies.slurm import SlurmMultifactor

_POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo": FifoBackfill,
    "fifo-strict": StrictFifo,
    "priority": OldPriority,
    "slurm": SlurmMultifactor,
    "kueue": KueueFairSharing,
}


def policy_names() -> tuple[str, ...]:
    """The baseline names, in a stable order."""
    return tuple(_POLICIES)


def make_policy(name: str) -> Policy:
    """A fresh baseline policy by name; ValueError naming the known ones for an unknown name."""
    factory = _POLICIES.get(name)
    if factory is None:
        raise ValueError(f"unknown baseline policy {name!r}; known: {', '.join(_POLICIES)}")
    return factory()


__all__ = ["make_policy", "policy_names"]
