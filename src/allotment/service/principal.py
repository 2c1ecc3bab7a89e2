"""Who is acting, and what they may do.

Owns: the Principal (user name, role per budget, admin and operator flags) loaded from the users and memberships
tables, and the rights every use case checks: belonging to a budget, leading a subtree, viewing and managing jobs,
operating nodes, administering.

Roles: `admin` (UserRow.admin, or the admin role on any budget) may do everything; `operator` (the operator role on
any budget) runs the fleet (node states and drains) and reads everything; `lead` of budget B manages the subtree
strictly below B (allocations, members, windows) and the jobs of B's whole subtree; `member` of a leaf submits to it
and manages their own jobs.

Must not: touch HTTP, or write anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.ledger.tree import ancestors
from allotment.service.errors import Forbidden, Unauthenticated
from allotment.store.tables import BudgetRow, MembershipRow, UserRow

ADMIN, OPERATOR, LEAD, MEMBER = "admin", "operator", "lead", "member"


@dataclass(frozen=True, slots=True)
class Principal:
    user: str
    roles: Mapping[str, str] = field(default_factory=dict)
    """budget → role (admin | operator | lead | member)."""
    admin: bool = False
    operator: bool = False

    @property
    def led(self) -> frozenset[str]:
        return frozenset(b for b, r in self.roles.items() if r in (LEAD, ADMIN))

    def belongs_to(self, budget: str) -> bool:
        return budget in self.roles

    def leads(self, budget: str, parents: Mapping[str, str | None], *, strictly: bool = False) -> bool:
        """Whether `budget` lies in the subtree of a budget this user leads (strictly below it with `strictly`)."""
        chain = ancestors(budget, parents) if budget in parents else []
        if not strictly and budget in self.led:
            return True
        return any(a in self.led for a in chain)

    def strictly_inside_led(self, parents: Mapping[str, str | None]) -> set[str]:
        """Every budget of `parents` for which `leads(budget, parents, strictly=True)` holds, in time linear in the
        tree (each chain walked once, however deep): for checking a whole plan, where a call per budget would cost
        the tree's depth each. A cycle (a plan's invalid new budgets) counts as outside."""
        led = self.led
        known: dict[str, bool] = {}
        for start in parents:
            path: list[str] = []
            seen: set[str] = set()
            node: str | None = start
            inside = False
            while node is not None and node not in known and node not in seen:
                seen.add(node)
                path.append(node)
                parent = parents.get(node)
                if parent in led:
                    inside = True
                    break
                node = parent
            else:  # a root, a budget already known, or a cycle
                inside = node is not None and known.get(node, False)
            for name in path:
                known[name] = inside
        return {name for name, inside in known.items() if inside}

    @property
    def may_submit_anywhere(self) -> bool:
        """Whether some budget may be charged by this user (checked before a spec is even read)."""
        return self.admin or bool(self.roles)

    def may_submit(self, budget: str, parents: Mapping[str, str | None]) -> bool:
        return self.admin or self.belongs_to(budget) or self.leads(budget, parents)

    def may_view_budget_jobs(self, budget: str, parents: Mapping[str, str | None]) -> bool:
        return self.admin or self.operator or self.belongs_to(budget) or self.leads(budget, parents)

    def may_manage_job(self, owner: str, budget: str, parents: Mapping[str, str | None]) -> bool:
        """Cancel or release: the owner, a lead of the budget's subtree, or an admin."""
        return self.admin or owner == self.user or self.leads(budget, parents)

    def require_admin(self, what: str) -> None:
        if not self.admin:
            raise Forbidden(f"{self.user} may not {what}: administrators only")

    def require_planner(self) -> None:
        """Budget plans: administrators and budget leads only (checked before a plan is read)."""
        if not (self.admin or self.led):
            raise Forbidden(f"{self.user} may not change budgets: administrators and budget leads only")

    def require_operator(self, what: str) -> None:
        if not (self.admin or self.operator):
            raise Forbidden(f"{self.user} may not {what}: operators and administrators only")


def budget_parents(session: Session) -> dict[str, str | None]:
    return dict(session.execute(select(BudgetRow.name, BudgetRow.parent)).all())


def load_principal(session: Session, user: str) -> Principal:
    """The principal of a configured user; Unauthenticated when the user does not exist (any more)."""
    row = session.get(UserRow, user)
    if row is None:
        raise Unauthenticated(f"unknown user {user!r}")
    roles = dict(
        session.execute(select(MembershipRow.budget, MembershipRow.role).where(MembershipRow.user == user)).all()
    )
    admin = bool(row.admin) or ADMIN in roles.values()
    return Principal(user, roles, admin=admin, operator=OPERATOR in roles.values())
