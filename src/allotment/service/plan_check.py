"""Checking a budget plan against an organisation's configuration, by the same code as `allot budget plan diff`.

Owns: `check_plan_against(text, config)`: the configuration is seeded into a scratch SQLite database (as a server
seeds its own), the clock set to the start of the plan's period, and the plan run through service/plans.diff_plan as
an administrator — so a what-if refuses exactly the plans a server would (a budget under a leaf, a parent change,
children above their parent, unknown references, bad windows), each problem with the plan's own line number and
exact decimals. A what-if (allot simulate --plan) calls it before it replays anything.

Must not: touch any database but its scratch one, or apply the plan.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from allotment.config import AllotmentConfig
from allotment.config.plans import BudgetPlan
from allotment.engine.setup import seed
from allotment.service.context import Context
from allotment.service.errors import ServiceError
from allotment.service.plans import diff_plan, parse_plan
from allotment.service.principal import Principal
from allotment.service.views import PlanDiff
from allotment.service.yamlinput import Document
from allotment.store.db import make_engine, session_factory
from allotment.store.migrate import upgrade


def check_plan_against(text: str, config: AllotmentConfig, period_start: int) -> tuple[BudgetPlan, PlanDiff]:
    """The plan in `text` and what it would change in `config`'s organisation at `period_start`; raises the
    service's Invalid (problems with lines) or Conflict exactly as `allot budget plan diff` would."""
    doc: Document[BudgetPlan] = parse_plan(text)
    with tempfile.TemporaryDirectory(prefix="allot-plan-") as scratch:
        engine = make_engine(f"sqlite:///{Path(scratch) / 'check.db'}")
        try:
            upgrade(engine)
            sessions = session_factory(engine)
            seed(sessions, config, period_start)
            ctx = Context(sessions, config, Path(scratch), lambda: period_start)
            diff = diff_plan(ctx, Principal("what-if", {}, admin=True), doc)
        finally:
            engine.dispose()
    return doc.value, diff


__all__ = ["ServiceError", "check_plan_against"]
