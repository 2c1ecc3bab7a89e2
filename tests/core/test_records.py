"""The decision records and Allocation are written with `init=False`, `Final` fields and their own `__init__`
(decision 44). They must still behave as the immutable dataclasses the shell and the tests rely on: equal by value,
hashable, `fields()` and `replace()`, and a pickle round trip (the equivalence fixture is pickled)."""

from __future__ import annotations

import pickle
from dataclasses import fields, replace
from typing import Any

from allotment.core.decisions import (
    Blocker,
    Hint,
    HintKind,
    Lapse,
    Preempt,
    PreemptReason,
    Renew,
    Reserve,
    Standing,
    Start,
    WaitReason,
)
from allotment.core.model import Allocation, ReservationKind, RunClass

RECORDS: dict[str, Any] = {
    "allocation": Allocation("n1", (0, 1)),
    "start": Start("j1", (Allocation("n1", (0, 1)),), RunClass.GUARANTEED, 7200, "fair-share"),
    "start, backfill": Start("j2", (), RunClass.OPPORTUNISTIC, None, "backfill", backfill_for="j9"),
    "preempt": Preempt("j3", PreemptReason.FOR_SESSION, 300, True, preemptor="s1"),
    "renew": Renew("j4", 9000),
    "lapse": Lapse("j5", "budget cannot pay for another slice"),
    "reserve": Reserve("j6", (("n1", 8),), 5000, ReservationKind.PLANNED, 100, gave_way=("j7",)),
    "hint": Hint(HintKind.FEWER_GPUS, "with 4 GPUs", 300),
    "standing": Standing(balance=10, committed=4, entitled=0.5, used=0.25),
    "wait reason": WaitReason(Blocker.CAPACITY, "needs 8 GPUs", 8, 2, 600, (Hint(HintKind.OPPORTUNISTIC, "x", None),)),
}


def test_equal_by_value_and_hashable() -> None:
    for name, record in RECORDS.items():
        twin = type(record)(*(getattr(record, f.name) for f in fields(record)))
        assert twin == record and twin is not record, name
        assert hash(twin) == hash(record), name
        assert len({twin, record}) == 1, name


def test_replace_changes_one_field_only() -> None:
    start = RECORDS["start"]
    later = replace(start, slice_end=9999)
    assert later.slice_end == 9999 and later.job_id == start.job_id and later != start
    assert start.slice_end == 7200


def test_a_pickle_round_trip_gives_an_equal_record() -> None:
    for name, record in RECORDS.items():
        assert pickle.loads(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)) == record, name


def test_defaults_are_the_documented_ones() -> None:
    assert Start("j", (), RunClass.SESSION, None, "session").backfill_for is None
    assert Preempt("j", PreemptReason.DRAIN, 0, True).preemptor is None
    assert Reserve("j", (), 0, ReservationKind.PLANNED, 0).gave_way == ()
    assert WaitReason(Blocker.FUNDS, "m", 1, 0, None).hints == ()
