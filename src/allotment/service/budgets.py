"""Budgets: the tree with each budget's allocation, spending and remaining credit in the current period, one budget
in detail (its run-out forecast, members, capacity windows), and members.

Owns: reading budget standings out of the ledger, rolled up the tree (a parent's figures include its whole
subtree). Budgets are visible to every user: fair share depends on everyone's standing.

Must not: change budgets (service.plans does, through a budget plan).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.ledger import INFRASTRUCTURE, rollup
from allotment.ledger.tree import ancestors
from allotment.service.context import Context
from allotment.service.errors import NotFound
from allotment.service.forecasts import forecasts
from allotment.service.principal import Principal
from allotment.service.views import BudgetDetail, BudgetNode, BudgetTree, MemberView
from allotment.service.windowuse import window_views
from allotment.store.accounts import balances, spending
from allotment.store.db import reading
from allotment.store.tables import BudgetRow, MembershipRow, PeriodRow, WindowRow


def _nodes(session: Session, ctx: Context) -> tuple[str, list[BudgetNode]]:
    period = ctx.period()
    rows = {r.name: r for r in session.scalars(select(BudgetRow))}
    parents = {name: r.parent for name, r in rows.items()}
    used = rollup(spending(session, period.id), parents)
    has_children = {p for p in parents.values() if p is not None}
    if session.get(PeriodRow, period.id) is not None:
        remaining = rollup(balances(session, period.id), parents)
    else:  # the engine has not opened the period yet: every leaf starts from its allocation
        allocated = {n: r.allocation_micro for n, r in rows.items() if n not in has_children}
        remaining = {n: v - used.get(n, 0) for n, v in rollup(allocated, parents).items()}
    children: dict[str | None, list[str]] = {}
    for name in sorted(rows):
        if name != INFRASTRUCTURE:
            children.setdefault(parents[name], []).append(name)
    out: list[BudgetNode] = []

    def visit(name: str, depth: int) -> None:
        r = rows[name]
        out.append(
            BudgetNode(
                name=name,
                parent=r.parent,
                depth=depth,
                leaf=name not in has_children,
                allocation_micro=r.allocation_micro,
                max_gpus=r.max_gpus,
                used_micro=used.get(name, 0),
                remaining_micro=remaining.get(name, 0),
            )
        )
        for child in children.get(name, []):
            visit(child, depth + 1)

    for root in children.get(None, []):
        visit(root, 0)
    if INFRASTRUCTURE in rows:
        visit(INFRASTRUCTURE, 0)
    return period.id, out


def budget_tree(ctx: Context, principal: Principal, root: str | None = None) -> BudgetTree:
    """Every budget depth first (or the subtree under `root`), with the current period's figures."""
    with reading(ctx.sessions) as session:
        period, nodes = _nodes(session, ctx)
        parents = {n.name: n.parent for n in nodes}
    if root is not None:
        if root not in parents:
            raise NotFound(f"no budget {root!r}")
        nodes = [n for n in nodes if n.name == root or root in ancestors(n.name, parents)]
    return BudgetTree(period=period, budgets=[n for n in nodes if root is not None or n.name != INFRASTRUCTURE])


def members(ctx: Context, principal: Principal, budget: str) -> list[MemberView]:
    with reading(ctx.sessions) as session:
        if session.get(BudgetRow, budget) is None:
            raise NotFound(f"no budget {budget!r}")
        rows = session.scalars(select(MembershipRow).where(MembershipRow.budget == budget).order_by(MembershipRow.user))
        return [MemberView(user=m.user, role=m.role) for m in rows]


def show_budget(ctx: Context, principal: Principal, budget: str) -> BudgetDetail:
    """One budget: its figures, its run-out forecast (service.forecasts), its members and capacity windows."""
    now = ctx.now()
    with reading(ctx.sessions) as session:
        period, nodes = _nodes(session, ctx)
        node = next((n for n in nodes if n.name == budget), None)
        if node is None:
            raise NotFound(f"no budget {budget!r}")
        forecast = forecasts(session, nodes, now, ctx.period(now).end)[budget]
        people = session.scalars(
            select(MembershipRow).where(MembershipRow.budget == budget).order_by(MembershipRow.user)
        )
        windows = session.scalars(
            select(WindowRow)
            .where(WindowRow.budget == budget, WindowRow.end > ctx.period(now).start)
            .order_by(WindowRow.start)
        )
        return BudgetDetail(
            period=period,
            budget=node,
            children=[n.name for n in nodes if n.parent == budget],
            forecast=forecast,
            members=[MemberView(user=m.user, role=m.role) for m in people],
            windows=window_views(session, windows, now),
        )
