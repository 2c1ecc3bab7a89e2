"""Hierarchical fair share with memory of past usage (rule `hierarchical-fair-share`, docs/policy.md §1).

Owns: the budget tree as the cycle sees it, each subtree's entitlement (from allocations of *active* siblings, so an
idle subtree's share flows to its active siblings), each subtree's usage (decayed past usage plus what it holds now,
projected over the usage mean life), the level ratio that orders siblings, the hierarchical pick of the next budget,
and the global standing used by the preemption rules.

Must not: look at priorities (they order jobs inside one budget only, promise 3) or at placement.

Formulas (u = usage, a = allocation, over the active siblings S of node n):
    level_ratio(n) = (u_n / Σ_S u) / (a_n / Σ_S a)         (0 when nobody in S has usage yet)
    entitled(n)   = Π over the path root→n of a_m / Σ_S(m) a
    standing(n)   = (u_n / u_root) / entitled(n)            (< 1: below its fair share)
Siblings are served in increasing level ratio, depth first, like Slurm's Fair Tree; usage u_n is
    decayed_usage_n + rate_held_n × τ,    τ = half-life / ln 2,
so a steady holding weighs as much as the decayed history it will become.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from allotment.core.model import Budget, Micro


class _TreeNode:
    """One budget in the tree (a plain class: core performance rules, 1)."""

    __slots__ = ("active", "allocation", "children", "name", "open", "parent", "usage")

    def __init__(self, name: str, parent: str | None, allocation: float) -> None:
        self.name = name
        self.parent = parent
        self.allocation = allocation
        self.children: list[str] = []
        self.usage = 0.0
        self.active = False
        self.open = False
        """Still has jobs to offer in this pass (pick() descends only into open subtrees)."""


class FairShare:
    """Mutable within one cycle: usage grows as the cycle places jobs, so later picks see earlier ones."""

    def __init__(self, budgets: Iterable[Budget], usage: Mapping[str, float], tau_hours: float) -> None:
        self._tau = tau_hours
        self._nodes: dict[str, _TreeNode] = {}
        for b in budgets:
            self._nodes[b.name] = _TreeNode(b.name, b.parent, float(max(b.allocation, 0)))
        self._roots: list[str] = []
        self._ancestors: dict[str, list[str]] = {}
        for n in sorted(self._nodes.values(), key=lambda x: x.name):
            if n.parent is None or n.parent not in self._nodes:
                self._roots.append(n.name)
            else:
                self._nodes[n.parent].children.append(n.name)
        for name, u in usage.items():
            if name in self._nodes:
                self._add_up(name, u)

    # -- building ----------------------------------------------------------------------------------------------
    def _add_up(self, name: str, amount: float) -> None:
        node: str | None = name
        while node is not None and node in self._nodes:
            self._nodes[node].usage += amount
            node = self._nodes[node].parent

    def hold(self, budget: str, credits_per_hour: float) -> None:
        """Count GPUs a budget holds (or is about to hold) at `credits_per_hour` full-price credits."""
        self._add_up(budget, credits_per_hour * self._tau)

    def mark_active(self, budget: str) -> None:
        node: str | None = budget
        while node is not None and node in self._nodes:
            self._nodes[node].active = True
            node = self._nodes[node].parent

    def set_open(self, budget: str, is_open: bool) -> None:
        """Open a leaf for pick(); closing a leaf closes ancestors whose children are all closed."""
        n = self._nodes[budget]
        n.open = is_open
        parent = n.parent
        while parent is not None and parent in self._nodes:
            p = self._nodes[parent]
            now_open = any(self._nodes[c].open for c in p.children)
            if p.open == now_open:
                break
            p.open = now_open
            parent = p.parent

    # -- reading -----------------------------------------------------------------------------------------------
    def _siblings(self, name: str) -> list[str]:
        parent = self._nodes[name].parent
        if parent is None or parent not in self._nodes:
            return self._roots
        return self._nodes[parent].children

    def _level_ratio(self, name: str, siblings: list[str]) -> float:
        active = [self._nodes[s] for s in siblings if self._nodes[s].active]
        total_u = sum(s.usage for s in active)
        total_a = sum(s.allocation for s in active)
        node = self._nodes[name]
        if total_u <= 0:
            return 0.0
        if total_a <= 0 or node.allocation <= 0:
            return float("inf")
        return (node.usage / total_u) / (node.allocation / total_a)

    def level_ratio(self, name: str) -> float:
        return self._level_ratio(name, self._siblings(name))

    def entitled(self, name: str) -> float:
        """Fraction of the whole fleet this budget is entitled to, given which budgets are active now."""
        frac = 1.0
        node: str | None = name
        while node is not None and node in self._nodes:
            sibs = [self._nodes[s] for s in self._siblings(node) if self._nodes[s].active or s == node]
            total_a = sum(s.allocation for s in sibs)
            frac *= self._nodes[node].allocation / total_a if total_a > 0 else 0.0
            node = self._nodes[node].parent
        return frac

    def used(self, name: str) -> float:
        """This budget's fraction of all active usage (decayed past + held now)."""
        total = sum(self._nodes[r].usage for r in self._roots if self._nodes[r].active)
        if total <= 0:
            return 0.0
        return self._nodes[name].usage / total

    def standing(self, name: str) -> float:
        """used / entitled: below 1.0 the budget is below its fair share."""
        ent = self.entitled(name)
        used = self.used(name)
        if ent <= 0:
            return float("inf") if used > 0 else 1.0
        return used / ent

    def standing_after(self, name: str, credits_per_hour_delta: float) -> float:
        """The standing this budget would have after holding `credits_per_hour_delta` more (or less)."""
        saved = self._saved(name)
        self._add_up(name, credits_per_hour_delta * self._tau)
        try:
            return self.standing(name)
        finally:
            self._restore(saved)

    def standings_after_swap(self, gainer: str, gain: float, loser: str, loss: float) -> tuple[float, float]:
        """(gainer's, loser's) standings if `loser` gave up `loss` credits/hour of holdings and `gainer` took
        `gain` credits/hour, both at once."""
        saved = self._saved(gainer) + self._saved(loser)
        self._add_up(gainer, gain * self._tau)
        self._add_up(loser, -loss * self._tau)
        try:
            return self.standing(gainer), self.standing(loser)
        finally:
            self._restore(saved)

    def _saved(self, name: str) -> list[tuple[_TreeNode, float]]:
        """The usage of `name` and its ancestors as it is now. A what-if query puts these exact values back rather
        than subtracting what it added: (u + d) - d is not always u in floating point, and a query that changed the
        usage by a rounding error would change later verdicts (strict comparisons) by being asked."""
        return [(self._nodes[a], self._nodes[a].usage) for a in self.ancestors(name)]

    @staticmethod
    def _restore(saved: list[tuple[_TreeNode, float]]) -> None:
        for node, usage in reversed(saved):
            node.usage = usage

    def pick(self) -> str | None:
        """The open leaf budget that deserves the next job: depth first, lowest level ratio among open siblings,
        ties broken by name."""
        siblings = self._roots
        while True:
            active = [self._nodes[s] for s in siblings if self._nodes[s].active]
            total_u = sum(n.usage for n in active)
            total_a = sum(n.allocation for n in active)
            best: _TreeNode | None = None
            best_key = (0.0, "")
            for name in siblings:
                node = self._nodes[name]
                if not node.open:
                    continue
                if total_u <= 0:
                    ratio = 0.0
                elif total_a <= 0 or node.allocation <= 0:
                    ratio = float("inf")
                else:
                    ratio = (node.usage / total_u) / (node.allocation / total_a)
                key = (ratio, name)
                if best is None or key < best_key:
                    best, best_key = node, key
            if best is None:
                return None
            if not best.children:
                return best.name
            siblings = best.children

    def is_leaf(self, name: str) -> bool:
        return name in self._nodes and not self._nodes[name].children

    def ancestors(self, name: str) -> list[str]:
        """The budget itself and every ancestor, nearest first."""
        found = self._ancestors.get(name)
        if found is None:
            found = []
            node: str | None = name
            while node is not None and node in self._nodes:
                found.append(node)
                node = self._nodes[node].parent
            self._ancestors[name] = found
        return found


def credits_per_hour(gpus: int, rate: Micro) -> float:
    """Full-price credits per hour for holding `gpus` GPUs of a type costing `rate` micro per GPU-hour."""
    return gpus * rate / 1_000_000
