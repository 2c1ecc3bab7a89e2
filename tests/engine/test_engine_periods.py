"""Budget periods in the running engine: a run across a period boundary is charged to each period for exactly the
time it held its GPUs there, and the new period opens with fresh allocations (issue 3)."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Engine, select

from allotment.core.units import cost
from allotment.executors.simulated import Outcome
from allotment.ledger.entries import EntryKind
from allotment.store.tables import LedgerEntryRow, PeriodRow
from tests.engine.rig import Rig

DEC_1 = 1_796_083_200  # 2026-12-01T00:00:00Z


def test_a_run_across_the_period_boundary_is_charged_to_each_period_exactly(db: Engine) -> None:
    rig = Rig(db)
    start = DEC_1 - 3600
    rig.clock.t = start
    rig.submit("long", gpus=8, outcome=Outcome(duration=2 * 3600), slice_seconds=3 * 3600)
    rig.step()
    for t in range(start + 600, DEC_1 + 2 * 3600 + 1, 600):  # a cycle every 10 minutes
        rig.step(t)
    assert rig.state("long") == "completed"
    with rig.sessions() as s:
        periods = {p.id: (p.start, p.end, p.closed) for p in s.scalars(select(PeriodRow))}
        per_period: dict[tuple[str, str], int] = defaultdict(int)
        for e in s.scalars(select(LedgerEntryRow).where(LedgerEntryRow.budget == "pretrain")):
            per_period[(e.period_id, e.kind)] += e.amount_micro
    assert periods["2026-11-01"][2] is True  # the old period was closed at the rollover
    hour = cost(8, 1_000_000, 1000, 3600)
    assert -per_period[("2026-11-01", EntryKind.CHARGE.value)] == hour
    assert -per_period[("2026-12-01", EntryKind.CHARGE.value)] == hour
    # the new period opened with the budget's allocation; nothing carried over (carry_over: false)
    assert per_period[("2026-12-01", EntryKind.ALLOCATION.value)] == 8000 * 1_000_000
    assert ("2026-12-01", EntryKind.CARRYOVER.value) not in per_period
