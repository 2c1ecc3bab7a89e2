"""A run's class and slice as every view shows them (`allot status`, `allot why`, node listings, the dashboard's job
page): what the run began as, the class it holds now and since when, and its one slice end.

Owns: reading those facts from a run's row. A guaranteed run keeps its `slice_end` when its slice lapses without
renewal (the engine reprices it to opportunistic from then, `price_since`), so a run whose class is opportunistic
but which has a slice end began as guaranteed, and is opportunistic since `price_since`. The slice end a view shows
is the run's (the last granted or renewed slice's end); the slice records (grant, renew) explain how it got there.

Must not: decide anything (the engine renews, lapses and reprices) or read the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from allotment.core.model import RunClass
from allotment.store.tables import RunRow, SliceRow


@dataclass(frozen=True, slots=True)
class ClassOf:
    began_as: str
    """The class the run started as: guaranteed, opportunistic or session."""
    run_class: str
    """The class it holds now (a guaranteed run past an unrenewed slice is opportunistic)."""
    class_since: int
    """When it took its current class: its start, or when its slice lapsed."""


def class_of(run: RunRow) -> ClassOf:
    now_class = run.run_class
    lapsed = now_class == RunClass.OPPORTUNISTIC.value and run.slice_end is not None
    began = RunClass.GUARANTEED.value if lapsed else now_class
    return ClassOf(began, now_class, run.price_since if began != now_class else run.started_at)


def renewals(run_id: str, slices: Iterable[SliceRow]) -> int:
    """How many times the run's slice was renewed."""
    return sum(1 for s in slices if s.run_id == run_id and s.kind == "renew")
