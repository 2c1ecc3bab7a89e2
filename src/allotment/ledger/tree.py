"""Balances up the budget tree.

Owns: which budgets are leaves (only leaves hold allocations and pay for jobs), and rolling leaf balances up
to every ancestor. (When a balance runs out is ledger/forecast.py's.)

Must not: read a clock or a database; callers pass the instants and ledger amounts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from allotment.core.model import Budget, Micro


def leaves(budgets: Iterable[Budget]) -> set[str]:
    """Budgets no other budget names as its parent."""
    items = list(budgets)
    parents = {b.parent for b in items if b.parent is not None}
    return {b.name for b in items if b.name not in parents}


def ancestors(name: str, parents: Mapping[str, str | None]) -> list[str]:
    """`name`'s ancestors from its parent up to the root. Raises on a cycle."""
    chain: list[str] = []
    seen = {name}
    parent = parents.get(name)
    while parent is not None:
        if parent in seen:
            raise ValueError(f"budget tree has a cycle through {parent}")
        seen.add(parent)
        chain.append(parent)
        parent = parents.get(parent)
    return chain


def depths(parents: Mapping[str, str | None]) -> dict[str, int]:
    """Each budget's number of ancestors, in time linear in the tree's size (each budget is walked up once, however
    deep the tree). A parent that is not itself in `parents` counts as a root. Raises on a cycle, as `ancestors`."""
    depth: dict[str, int] = {}
    for start in parents:
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = start
        while node is not None and node not in depth and node in parents:
            if node in on_path:
                raise ValueError(f"budget tree has a cycle through {node}")
            on_path.add(node)
            path.append(node)
            node = parents[node]
        base = -1 if node is None else depth.get(node, 0)  # a parent outside `parents` is a root of depth 0
        for offset, name in enumerate(reversed(path), start=1):
            depth[name] = base + offset
    return depth


def rollup(amounts: Mapping[str, Micro], parents: Mapping[str, str | None]) -> dict[str, Micro]:
    """Each budget's own amount plus all its descendants' amounts. Every budget in `parents` appears."""
    totals: dict[str, Micro] = dict.fromkeys(parents, 0)
    for name, amount in amounts.items():
        totals[name] = totals.get(name, 0) + amount
        for ancestor in ancestors(name, parents):
            totals[ancestor] = totals.get(ancestor, 0) + amount
    return totals


def overcommitted(budgets: Iterable[Budget]) -> dict[str, Micro]:
    """Parents whose children's allocations add up to more than their own: name → excess."""
    items = list(budgets)
    children: dict[str, Micro] = {}
    for b in items:
        if b.parent is not None:
            children[b.parent] = children.get(b.parent, 0) + b.allocation
    return {
        b.name: children[b.name] - b.allocation for b in items if b.name in children and children[b.name] > b.allocation
    }
