"""Loading the configured fleet, budget tree, users and capacity windows into the store.

Owns: seed_from(), which upserts clusters, nodes, budgets (parents before children), users, memberships
and windows from core types and simple member tuples, and makes sure the infrastructure account exists.

Must not: read configuration files (allotment.config does) or overwrite operational node state: a node
that already exists keeps its state, forced flag and reason (a drain survives a restart); only its shape
is updated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, select, tuple_
from sqlalchemy.orm import Session

from allotment.core.model import Budget, CapacityWindow, Cluster, Node, Seconds
from allotment.ledger import INFRASTRUCTURE
from allotment.ledger.tree import ancestors
from allotment.store.tables import BudgetRow, ClusterRow, MembershipRow, NodeRow, UserRow, WindowRow

Member = tuple[str, str, str]
"""(budget, user, role)"""


@dataclass(frozen=True, slots=True)
class Seeded:
    clusters: int
    nodes: int
    budgets: int
    users: int
    memberships: int
    windows: int


def _budget_order(budgets: list[Budget]) -> list[Budget]:
    parents = {b.name: b.parent for b in budgets}
    return sorted(budgets, key=lambda b: (len(ancestors(b.name, parents)), b.name))


def seed_from(
    session: Session,
    *,
    now: Seconds,
    clusters: Iterable[Cluster] = (),
    nodes: Iterable[Node] = (),
    budgets: Iterable[Budget] = (),
    members: Iterable[Member] = (),
    users: Iterable[str] = (),
    admins: Iterable[str] = (),
    windows: Iterable[CapacityWindow] = (),
    infrastructure: str = INFRASTRUCTURE,
    prune: bool = False,
) -> Seeded:
    """Upsert the configuration. Users named in `members`, `users` or `admins` are created; `admins` are
    marked admin (others keep their flag). With `prune`, memberships and windows absent from the arguments
    are deleted (nodes and budgets never are: history refers to them). Returns how many of each were
    given."""
    cluster_list, node_list, budget_list = list(clusters), list(nodes), list(budgets)
    member_list, window_list, admin_set = list(members), list(windows), set(admins)

    for c in cluster_list:
        crow = session.get(ClusterRow, c.name)
        if crow is None:
            session.add(ClusterRow(name=c.name, topology=list(c.topology)))
        else:
            crow.topology = list(c.topology)
    session.flush()

    for n in node_list:
        nrow = session.get(NodeRow, n.name)
        if nrow is None:
            nrow = NodeRow(name=n.name, state=n.state.value, forced=n.forced, reason=None)
            session.add(nrow)
        nrow.cluster, nrow.gpu_type, nrow.gpus = n.cluster, n.gpu_type, n.gpus
        nrow.cpus, nrow.memory_mib = n.cpus, n.memory
        nrow.labels, nrow.updated_at = dict(n.labels), now
    session.flush()

    if infrastructure and all(b.name != infrastructure for b in budget_list):
        budget_list.append(Budget(infrastructure, None, 0))
    for b in _budget_order(budget_list):
        brow = session.get(BudgetRow, b.name)
        if brow is None:
            brow = BudgetRow(name=b.name)
            session.add(brow)
        brow.parent, brow.allocation_micro, brow.max_gpus, brow.updated_at = (
            b.parent,
            b.allocation,
            b.max_gpus,
            now,
        )
        session.flush()

    names = {u for _, u, _ in member_list} | set(users) | admin_set
    for name in sorted(names):
        urow = session.get(UserRow, name)
        if urow is None:
            session.add(UserRow(name=name, admin=name in admin_set))
        elif name in admin_set:
            urow.admin = True
    session.flush()

    for budget, user, role in member_list:
        mrow = session.get(MembershipRow, (budget, user))
        if mrow is None:
            session.add(MembershipRow(budget=budget, user=user, role=role))
        else:
            mrow.role = role

    for w in window_list:
        wrow = session.get(WindowRow, w.id)
        if wrow is None:
            wrow = WindowRow(id=w.id)
            session.add(wrow)
        wrow.budget, wrow.cluster, wrow.gpu_type = w.budget, w.cluster, w.gpu_type
        wrow.gpus, wrow.start, wrow.end = w.gpus, w.start, w.end
    session.flush()

    if prune:
        keep = [(b, u) for b, u, _ in member_list]
        stmt = delete(MembershipRow)
        if keep:
            stmt = stmt.where(tuple_(MembershipRow.budget, MembershipRow.user).not_in(keep))
        session.execute(stmt)
        wstmt = delete(WindowRow)
        if window_list:
            wstmt = wstmt.where(WindowRow.id.not_in([w.id for w in window_list]))
        session.execute(wstmt)
        session.flush()

    return Seeded(len(cluster_list), len(node_list), len(budget_list), len(names), len(member_list), len(window_list))


def memberships(session: Session) -> list[Member]:
    rows = session.scalars(select(MembershipRow).order_by(MembershipRow.budget, MembershipRow.user))
    return [(r.budget, r.user, r.role) for r in rows]
