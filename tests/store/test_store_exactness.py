"""Promise 6, on a real database: however a run's time is cut into charge intervals, and however often an
interval is retried (committed twice, or rolled back and redone), the posted charges equal cost(whole run) to
the microunit."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from allotment.core.model import RunClass
from allotment.core.units import cost
from allotment.ledger import Period, run_rate
from allotment.store.accounts import ensure_period
from allotment.store.metering import charge_run, new_run, reprice_run
from allotment.store.tables import LedgerEntryRow

from .support import RATES, T0, add_job, seed_org

_ids = itertools.count()


@pytest.fixture(scope="module")
def seeded(engine: Engine, sessions: sessionmaker[Session]) -> sessionmaker[Session]:
    with sessions() as s:
        seed_org(s)
        ensure_period(s, Period("all-time", 0, 2**40))
        s.commit()
    return sessions


pieces = st.lists(st.integers(min_value=0, max_value=4 * 86_400), min_size=1, max_size=12)
retries = st.lists(st.sampled_from(["commit", "rollback", "none"]), min_size=12, max_size=12)


def _charge(sessions: sessionmaker[Session], run: str, until: int, retry: str) -> None:
    with sessions() as s:
        charge_run(s, run, until)
        s.commit()
    if retry == "commit":  # the same interval again, after it committed
        with sessions() as s:
            charge_run(s, run, until)
            s.commit()
    elif retry == "rollback":  # a crashed attempt, then the real one
        with sessions() as s:
            charge_run(s, run, until + 17)
            s.rollback()


def _posted(sessions: sessionmaker[Session], run: str) -> int:
    with sessions() as s:
        total = s.scalar(select(func.sum(LedgerEntryRow.amount_micro)).where(LedgerEntryRow.run_id == run))
        return -int(total or 0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    h100=st.integers(min_value=1, max_value=64),
    b200=st.integers(min_value=0, max_value=64),
    price=st.sampled_from([1000, 400, 250, 999]),
    start=st.integers(min_value=0, max_value=86_400),
    duration=st.integers(min_value=0, max_value=4 * 86_400),
    cuts=pieces,
    retry=retries,
)
def test_charged_pieces_sum_to_the_whole_run(
    seeded: sessionmaker[Session],
    h100: int,
    b200: int,
    price: int,
    start: int,
    duration: int,
    cuts: list[int],
    retry: list[str],
) -> None:
    job = f"prop-{next(_ids)}"
    begin, end = T0 + start, T0 + start + duration
    rate = run_rate([("h100", h100), ("b200", b200)], RATES)
    with seeded() as s:
        add_job(s, job)
        run = new_run(
            s,
            job_id=job,
            attempt=0,
            started_at=begin,
            placement=[{"node": "n1", "gpus": list(range(h100))}],
            run_class=RunClass.GUARANTEED,
            slice_end=None,
            rate=rate,
            price=price,
        ).id
        s.commit()
    instants = [*sorted(begin + min(c, duration) for c in cuts), end]
    for until, again in zip(instants, retry, strict=False):
        _charge(seeded, run, until, again)
    _charge(seeded, run, end, "commit")
    assert _posted(seeded, run) == cost(1, rate, price, duration)
    if b200 == 0:
        assert _posted(seeded, run) == cost(h100, RATES["h100"], price, duration)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gpus=st.integers(min_value=1, max_value=64),
    slice_len=st.integers(min_value=1, max_value=86_400),
    tail=st.integers(min_value=0, max_value=86_400),
    cuts=pieces,
)
def test_a_lapsed_slice_is_charged_per_segment_exactly(
    seeded: sessionmaker[Session], gpus: int, slice_len: int, tail: int, cuts: list[int]
) -> None:
    job = f"lapse-{next(_ids)}"
    rate = run_rate([("h100", gpus)], RATES)
    with seeded() as s:
        add_job(s, job)
        run = new_run(
            s,
            job_id=job,
            attempt=0,
            started_at=T0,
            placement=[{"node": "n1", "gpus": list(range(gpus))}],
            run_class=RunClass.GUARANTEED,
            slice_end=T0 + slice_len,
            rate=rate,
            price=1000,
        ).id
        s.commit()
    end = T0 + slice_len + tail
    instants = sorted(T0 + c % (slice_len + tail + 1) for c in cuts)
    repriced = False
    for until in [*instants, end]:
        if not repriced and until >= T0 + slice_len:
            with seeded() as s:
                reprice_run(s, run, T0 + slice_len, RunClass.OPPORTUNISTIC, 400)
                s.commit()
            repriced = True
        with seeded() as s:
            charge_run(s, run, until)
            s.commit()
    assert _posted(seeded, run) == cost(1, rate, 1000, slice_len) + cost(1, rate, 400, tail)
