"""CPUs and memory of the local executor's attempts (decision 60): which cores each replica is pinned to.

Owns: `choose_cores`, giving each replica of a new attempt that asks for CPUs its own set of this host's cores — the
cores the fewest live attempts are pinned to, lowest first, so attempts that ask for CPUs get cores of their own
while the host has enough, and share the least-used ones when it has not — and `pinned_cores`, the cores a live
attempt's spec.json records. The supervisor applies the sets (sched_setaffinity) and the memory limit
(RLIMIT_DATA) in each replica between fork and exec.

Must not: import anything but the standard library, or decide where a job runs (placement did: these are its CPUs
on this host).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any


def choose_cores(available: Sequence[int], in_use: Iterable[int], replicas: int, cpus: int) -> list[list[int]]:
    """`replicas` sets of `cpus` cores each from `available`: the least-used cores first (by how many live
    attempts' replicas are pinned to each), lowest index among equals; no core twice in one attempt while the host
    has enough. Empty when the attempt asks for no CPUs."""
    if cpus <= 0 or replicas <= 0 or not available:
        return []
    use = Counter(in_use)
    order = sorted(available, key=lambda c: (use[c], c))
    sets: list[list[int]] = []
    at = 0
    for _ in range(replicas):
        chosen: list[int] = []
        for _ in range(min(cpus, len(order))):
            chosen.append(order[at % len(order)])
            at += 1
        sets.append(sorted(chosen))
    return sets


def pinned_cores(spec: dict[str, Any] | None) -> list[int]:
    """The cores an attempt's spec.json pins its replicas to (repeated once per replica pinned to it)."""
    if spec is None:
        return []
    return [int(c) for r in spec.get("replicas", ()) for c in (r.get("cpuset") or ())]
