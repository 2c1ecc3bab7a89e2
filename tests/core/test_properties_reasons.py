"""Promise 10: every pending job can say why it waits, in numbers: a blocker, a message with the numbers behind it,
the GPUs it needs, and an estimated start (None only when no amount of waiting for capacity would start it)."""

from __future__ import annotations

import re

from hypothesis import example, given

from allotment.core.decisions import Blocker
from tests.core.builders import HOUR, World
from tests.core.strategies import PROPERTY, Case, cases, decide

NO_ESTIMATE = frozenset({Blocker.FUNDS, Blocker.LIMIT, Blocker.SESSION_LIMIT, Blocker.NO_POOL, Blocker.WINDOW})


@PROPERTY
@given(cases())
def test_every_waiting_job_has_a_reason_for_its_own_size(case: Case) -> None:
    snap, now = case.snapshot, case.now
    d = decide(case)
    started = {s.job_id for s in d.starts}
    waiting = {j.id for j in snap.jobs if j.run is None and j.id not in started}
    assert set(d.pending) == waiting
    jobs = {j.id: j for j in snap.jobs}
    for job_id, why in d.pending.items():
        assert why.message.strip(), f"{job_id}: empty message"
        assert why.needed_gpus == jobs[job_id].total_gpus
        assert why.free_gpus >= 0
        assert why.estimated_start is None or why.estimated_start >= now
        for hint in why.hints:
            assert hint.detail.strip()
            assert hint.start is None or hint.start >= now


def _booked_pool() -> Case:
    """Another budget's open capacity window books the only pool."""
    w = World().cluster("c1", nodes=1).budget("red").budget("blue")
    w.window("w", "blue", "c1", gpus=8, start=0, end=10 * HOUR)
    w.pending("p1", "red", gpus=4)
    return Case(w.snapshot(), 60, {})


@PROPERTY
@example(_booked_pool())
@given(cases())
def test_every_wait_message_carries_its_numbers(case: Case) -> None:
    d = decide(case)
    for job_id, why in d.pending.items():
        assert re.search(r"\d", why.message), f"{job_id} ({why.blocker}): no number in {why.message!r}"


def _gang_larger_than_its_cluster() -> Case:
    """A 3-node gang in a 2-node cluster can never start there."""
    w = World().cluster("c1", nodes=2).budget("red")
    w.pending("g", "red", gpus=8, replicas=3)
    return Case(w.snapshot(), 60, {})


@PROPERTY
@example(_gang_larger_than_its_cluster())
@given(cases())
def test_only_hopeless_blockers_have_no_estimated_start(case: Case) -> None:
    d = decide(case)
    for job_id, why in d.pending.items():
        if why.estimated_start is None:
            assert why.blocker in NO_ESTIMATE, f"{job_id} waits for {why.blocker} with no estimated start"
