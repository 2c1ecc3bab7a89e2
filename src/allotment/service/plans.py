"""The budgeting process: a budget plan (YAML) diffed against the current state and applied atomically.

A plan names the period it is for (the current one), why it is made, and the budgets it sets: allocation, optional
max_gpus, and optionally the complete member list of a budget; new budgets name their parent. When it has a
`windows` section, that section is the complete set of capacity windows of the budgets the plan lists. Budgets the
plan does not list are left as they are.

Owns: the plan model, every check of a plan against the current state (tree sums: children never above their
parent's allocation; references; window pools; who may change what: administrators anything, a lead only budgets
strictly inside a subtree they lead and only member or lead roles), the diff, and applying it in one transaction
with an audit record (who, when, why) and the ledger adjustments that move the current period's leaf balances to
the new allocations. Any problem rejects the whole plan: nothing changes.

Must not: open or close periods (the engine does at each period start).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from allotment.config.errors import Loc
from allotment.config.fields import credits_text, to_micro
from allotment.config.plans import BudgetPlan, PlanBudget, PlanMember, PlanWindow
from allotment.ledger import INFRASTRUCTURE, Entry, EntryKind, adjust_key, alloc_key
from allotment.ledger.tree import depths
from allotment.service.context import Context
from allotment.service.errors import Conflict, FieldProblem, Forbidden, Invalid
from allotment.service.principal import LEAD, MEMBER, Principal
from allotment.service.views import PlanApplied, PlanChange, PlanDiff
from allotment.service.yamlinput import Document, from_data, from_text
from allotment.store.accounts import post
from allotment.store.records import audit
from allotment.store.tables import BudgetRow, MembershipRow, NodeRow, PeriodRow, UserRow, WindowRow

__all__ = ["BudgetPlan", "PlanBudget", "PlanMember", "PlanWindow"]


def parse_plan(text: str) -> Document[BudgetPlan]:
    return from_text(BudgetPlan, text, "budget plan")


def plan_from_data(data: Any) -> Document[BudgetPlan]:
    return from_data(BudgetPlan, data, "budget plan")


def _window(w: WindowRow | PlanWindow) -> dict[str, Any]:
    return {"cluster": w.cluster, "gpu_type": w.gpu_type, "gpus": w.gpus, "start": w.start, "end": w.end}


class _Planner:
    """Checks a plan against the state read in `session` and works out its changes."""

    def __init__(self, session: Session, ctx: Context, principal: Principal, doc: Document[BudgetPlan]) -> None:
        self.session, self.ctx, self.principal, self.doc = session, ctx, principal, doc
        self.plan = doc.value
        self.rows = {r.name: r for r in session.scalars(select(BudgetRow))}
        self.problems: list[FieldProblem] = []
        self.changes: list[PlanChange] = []

    def bad(self, loc: Loc, reason: str) -> None:
        self.problems.append(self.doc.problem(loc, reason))

    def run(self) -> list[PlanChange]:
        current = self.ctx.period().id
        if self.plan.period != current:
            raise Conflict(f"the plan is for period {self.plan.period}; the current period is {current}")
        parents = {n: r.parent for n, r in self.rows.items()}
        self._budgets(parents)
        self._authorise(parents)
        self._sums(parents)
        self._members()
        self._windows()
        if self.problems:
            self.problems.sort(key=lambda p: (p.line or 0, p.field))
            raise Invalid("the budget plan is invalid: " + "; ".join(map(str, self.problems)), self.problems)
        return self.changes

    def _budgets(self, parents: dict[str, str | None]) -> None:
        names = Counter(b.name for b in self.plan.budgets)
        has_children = {p for p in parents.values() if p is not None}
        planned = set(names)
        for i, b in enumerate(self.plan.budgets):
            if names[b.name] > 1:
                self.bad(("budgets", i, "name"), f"budget {b.name!r} is listed twice")
            if b.name == INFRASTRUCTURE:
                self.bad(("budgets", i, "name"), "the infrastructure account has no allocation to plan")
                continue
            row = self.rows.get(b.name)
            micro = to_micro(b.allocation)
            if row is not None:
                if "parent" in b.model_fields_set and b.parent != row.parent:
                    self.bad(
                        ("budgets", i, "parent"), f"budget {b.name!r} is under {row.parent!r}; budgets do not move"
                    )
                if row.allocation_micro != micro:
                    self.changes.append(
                        PlanChange(
                            kind="budget", target=b.name, field="allocation", old=row.allocation_micro, new=micro
                        )
                    )
                if "max_gpus" in b.model_fields_set and row.max_gpus != b.max_gpus:
                    self.changes.append(
                        PlanChange(kind="budget", target=b.name, field="max_gpus", old=row.max_gpus, new=b.max_gpus)
                    )
                continue
            if b.parent is None:
                self.bad(("budgets", i, "parent"), f"{b.name!r} is a new budget: name its parent")
                continue
            if b.parent not in self.rows and b.parent not in planned:
                self.bad(("budgets", i, "parent"), f"unknown budget {b.parent!r}")
                continue
            if b.parent in self.rows and b.parent not in has_children:
                self.bad(("budgets", i, "parent"), f"{b.parent!r} pays for jobs; it cannot get sub-budgets")
                continue
            parents[b.name] = b.parent
            self.changes.append(
                PlanChange(
                    kind="budget",
                    target=b.name,
                    field="created",
                    old=None,
                    new={"parent": b.parent, "allocation": micro, "max_gpus": b.max_gpus},
                )
            )
        try:
            depths(parents)
        except ValueError as exc:
            self.bad(("budgets",), str(exc))

    def _authorise(self, parents: dict[str, str | None]) -> None:
        p = self.principal
        p.require_planner()
        if p.admin:
            return
        below = p.strictly_inside_led(parents)
        for b in self.plan.budgets:
            if b.name not in below:
                raise Forbidden(f"{p.user} may not change budget {b.name!r}: it is not inside a subtree they lead")
            for m in b.members or ():
                if m.role.value not in (LEAD, MEMBER):
                    raise Forbidden(f"{p.user} may not grant the {m.role.value} role: administrators only")
        for w in self.plan.windows or ():
            if w.budget not in below:
                raise Forbidden(f"{p.user} may not book windows for {w.budget!r}: not inside a subtree they lead")

    def _sums(self, parents: dict[str, str | None]) -> None:
        alloc = {n: r.allocation_micro for n, r in self.rows.items()}
        index: dict[str, int] = {}
        for i, b in enumerate(self.plan.budgets):
            alloc[b.name] = to_micro(b.allocation)
            index[b.name] = i
        touched = {b.name for b in self.plan.budgets} | {parents.get(b.name) for b in self.plan.budgets}
        totals: dict[str, int] = {}
        for name, parent in parents.items():
            if parent is not None:
                totals[parent] = totals.get(parent, 0) + alloc.get(name, 0)
        first_child: dict[str | None, str] = {}
        for b in self.plan.budgets:
            first_child.setdefault(parents.get(b.name), b.name)
        for parent, total in sorted(totals.items()):
            if parent in touched and total > alloc.get(parent, 0):
                child = first_child.get(parent, parent)
                loc: Loc = ("budgets", index[child], "allocation") if child in index else ("budgets",)
                self.bad(
                    loc,
                    f"the budgets under {parent!r} would get {credits_text(total)} credits, more than its "
                    f"{credits_text(alloc.get(parent, 0))}",
                )

    def _members(self) -> None:
        users = set(self.session.scalars(select(UserRow.name)))
        current: dict[str, dict[str, str]] = {}
        if any(b.members is not None for b in self.plan.budgets):
            for row in self.session.scalars(select(MembershipRow)):
                current.setdefault(row.budget, {})[row.user] = row.role
        for i, b in enumerate(self.plan.budgets):
            if b.members is None:
                continue
            old = current.get(b.name, {})
            new: dict[str, str] = {}
            for j, m in enumerate(b.members):
                if m.user not in users:
                    self.bad(("budgets", i, "members", j, "user"), f"unknown user {m.user!r} (users are configured)")
                if m.user in new:
                    self.bad(("budgets", i, "members", j, "user"), f"{m.user!r} is listed twice")
                new[m.user] = m.role.value
            for user in sorted(set(old) | set(new)):
                if old.get(user) != new.get(user):
                    self.changes.append(
                        PlanChange(kind="member", target=b.name, field=user, old=old.get(user), new=new.get(user))
                    )

    def _windows(self) -> None:
        if self.plan.windows is None:
            return
        scope = {b.name for b in self.plan.budgets}
        pools = {
            (c, t): int(n or 0)
            for c, t, n in self.session.execute(
                select(NodeRow.cluster, NodeRow.gpu_type, func.sum(NodeRow.gpus)).group_by(
                    NodeRow.cluster, NodeRow.gpu_type
                )
            )
        }
        existing = {w.id: w for w in self.session.scalars(select(WindowRow))}
        ids = Counter(w.id for w in self.plan.windows)
        for i, w in enumerate(self.plan.windows):
            if w.budget not in scope:
                self.bad(("windows", i, "budget"), f"{w.budget!r} is not among the plan's budgets")
            if ids[w.id] > 1:
                self.bad(("windows", i, "id"), f"window {w.id!r} is listed twice")
            if w.id in existing and existing[w.id].budget not in scope:
                self.bad(("windows", i, "id"), f"window {w.id!r} belongs to {existing[w.id].budget!r}")
            size = pools.get((w.cluster, w.gpu_type))
            if size is None:
                self.bad(("windows", i, "gpu_type"), f"no pool of {w.gpu_type} GPUs in cluster {w.cluster!r}")
            elif w.gpus > size:
                self.bad(("windows", i, "gpus"), f"the pool has {size} GPUs; the window asks for {w.gpus}")
            if w.start >= w.end:
                self.bad(("windows", i, "end"), "a window must end after it starts")
        planned = {w.id: w for w in self.plan.windows}
        for wid, row in sorted(existing.items()):
            if row.budget in scope and wid not in planned:
                self.changes.append(PlanChange(kind="window", target=row.budget, field=wid, old=_window(row), new=None))
        for wid, w in sorted(planned.items()):
            old = existing.get(wid)
            if old is None or _window(old) != _window(w) or old.budget != w.budget:
                self.changes.append(
                    PlanChange(
                        kind="window",
                        target=w.budget,
                        field=wid,
                        old=_window(old) if old is not None else None,
                        new=_window(w),
                    )
                )


def diff_plan(ctx: Context, principal: Principal, doc: Document[BudgetPlan]) -> PlanDiff:
    """What applying the plan would change; raises like apply_plan would."""
    with ctx.sessions() as session:
        session.connection(execution_options={"sqlite_begin": "DEFERRED"})
        changes = _Planner(session, ctx, principal, doc).run()
    return PlanDiff(period=doc.value.period, changes=changes)


def apply_plan(ctx: Context, principal: Principal, doc: Document[BudgetPlan], why: str = "") -> PlanApplied:
    """Apply the whole plan in one transaction with an audit record, or nothing of it."""
    plan = doc.value
    reason = (why or plan.why).strip()
    if not reason:
        raise Invalid.of("why", "say why the plan is applied (it goes into the audit log)")
    now = ctx.now()
    with ctx.sessions.begin() as session:
        changes = _Planner(session, ctx, principal, doc).run()
        record = audit(
            session,
            at=now,
            actor=principal.user,
            action="plan.apply",
            target=f"period:{plan.period}",
            why=reason,
            detail={"changes": [c.model_dump() for c in changes], "plan": plan.model_dump(mode="json")},
        )
        _write(session, plan, changes, now, record.id)
    ctx.notify()
    return PlanApplied(period=plan.period, changes=changes, audit_id=record.id, applied_at=now, actor=principal.user)


def _write(session: Session, plan: BudgetPlan, changes: list[PlanChange], now: int, audit_id: int) -> None:
    period_open = session.get(PeriodRow, plan.period) is not None
    created = {c.target: c for c in changes if c.kind == "budget" and c.field == "created"}
    try:  # parents first: a plan may list a new child before its new parent
        depth = depths({name: c.new["parent"] for name, c in created.items()})
    except ValueError:
        raise Invalid.of("budgets", "the new budgets' parents form a cycle") from None
    for name in sorted(created, key=lambda n: (depth[n], n)):
        c = created[name]
        session.add(
            BudgetRow(
                name=name,
                parent=c.new["parent"],
                allocation_micro=c.new["allocation"],
                max_gpus=c.new["max_gpus"],
                updated_at=now,
            )
        )
    session.flush()
    rows = {r.name: r for r in session.scalars(select(BudgetRow))}
    parents = {p for p in (r.parent for r in rows.values()) if p is not None}
    memo = f"budget plan for {plan.period} (audit {audit_id})"
    for c in changes:
        if c.kind != "budget":
            continue
        row = rows[c.target]
        if c.field == "allocation":
            row.allocation_micro, row.updated_at = int(c.new), now
            if period_open and c.target not in parents:
                post(
                    session,
                    Entry(
                        c.target,
                        EntryKind.ADJUSTMENT,
                        int(c.new) - int(c.old),
                        now,
                        adjust_key(c.target, f"plan-{audit_id}"),
                        plan.period,
                        memo=memo,
                    ),
                )
        elif c.field == "max_gpus":
            row.max_gpus, row.updated_at = c.new, now
        elif c.field == "created" and period_open and c.target not in parents:
            post(
                session,
                Entry(
                    c.target,
                    EntryKind.ALLOCATION,
                    int(c.new["allocation"]),
                    now,
                    alloc_key(c.target, plan.period),
                    plan.period,
                    memo=memo,
                ),
            )
    for c in changes:
        if c.kind == "member":
            member = session.get(MembershipRow, (c.target, c.field))
            if c.new is None and member is not None:
                session.delete(member)
            elif member is None:
                session.add(MembershipRow(budget=c.target, user=c.field, role=c.new))
            else:
                member.role = c.new
        elif c.kind == "window":
            if c.new is None:
                session.execute(delete(WindowRow).where(WindowRow.id == c.field))
                continue
            window = session.get(WindowRow, c.field) or WindowRow(id=c.field)
            window.budget = c.target
            window.cluster, window.gpu_type, window.gpus = c.new["cluster"], c.new["gpu_type"], c.new["gpus"]
            window.start, window.end = c.new["start"], c.new["end"]
            session.add(window)
    session.flush()
