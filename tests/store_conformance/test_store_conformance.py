"""The store conformance suite (issue 20): what every SchedulingStore promises the engine, asserted alike on the
in-memory store, SQLite and PostgreSQL — through the engine's own steps (engine/cycle.py) and the unit of work.

Promises: a period is opened and funded once; a transaction that raises leaves nothing; a submission is pending in
the next snapshot and a cancelled pending job ends; a start opens a run and a launch intent delivered once, in
order; open runs, their meters and the next deadline are what the cycle wrote; charges are exact to the microunit
and posted once per key; a closed period refuses new entries; an exit ends the run and the job and charges the rest;
an array's tasks are written at once, at most `%N` of them are let through, and each launch carries its place;
holds and dependencies (jobs.hold, jobs.dependency) keep jobs out of the snapshot alike, and a dependency that can
never be satisfied is cancelled in the cycle, with the jobs that depended on it; a job's checkpoint reports reach
the snapshot's run with the interval between them.
"""

from __future__ import annotations

import pytest

from allotment.changes.records import ChangeSet, UsageUpdate
from allotment.config.arrays import parse_array
from allotment.core.cycle import AllotmentPolicy
from allotment.core.jobstate import JobState
from allotment.core.units import cost
from allotment.engine.cycle import cycle, hear
from allotment.ledger.entries import Entry, EntryKind, adjust_key
from allotment.ports.executor import ArrayPosition, EventKind, ExecutorEvent
from allotment.ports.store import IntentKind
from allotment.store.errors import ClosedPeriodError
from tests.store_conformance.backends import CHARGE_EVERY, T0, Backend, job, snapshot

H = 3600
DECIDE = AllotmentPolicy().decide
CREDIT = 1_000_000


def _balance(b: Backend, budget: str, now: int) -> int:
    return snapshot(b, now).accounts[budget].balance


def test_the_first_cycle_opens_the_period_and_funds_every_leaf_once(store: Backend) -> None:
    cycle(store.store, DECIDE, T0 + H)
    cycle(store.store, DECIDE, T0 + 2 * H)
    snap = snapshot(store, T0 + 2 * H)
    assert {b: a.balance for b, a in snap.accounts.items() if b in ("pretrain", "finetune", "detection")} == {
        "pretrain": 8000 * CREDIT,
        "finetune": 5000 * CREDIT,
        "detection": 6000 * CREDIT,
    }
    assert snap.accounts["lab"].balance == 0  # inner budgets only split: leaves pay
    with store.store.transaction(T0 + 2 * H) as tx:
        found = tx.period("2026-11-01")
    assert found is not None and found[1] is False


def test_a_transaction_that_raises_leaves_nothing(store: Backend) -> None:
    cycle(store.store, DECIDE, T0 + H)
    before = _balance(store, "pretrain", T0 + H)
    entry = Entry("pretrain", EntryKind.ADJUSTMENT, -5 * CREDIT, T0 + H, adjust_key("pretrain", "r1"), "2026-11-01")
    with pytest.raises(RuntimeError, match="crash"), store.store.transaction(T0 + H) as tx:
        tx.persist(ChangeSet(entries=[entry], state={"marker": 1}, usage=[UsageUpdate("pretrain", 9.0, T0, new=True)]))
        raise RuntimeError("crash")
    assert _balance(store, "pretrain", T0 + H) == before
    with store.store.transaction(T0 + H) as tx:
        assert tx.state("marker") is None
        assert "pretrain" not in tx.usage() or tx.usage()["pretrain"][0] != 9.0
    with store.store.transaction(T0 + H) as tx:  # the same entry posts now, once, however often it is persisted
        tx.persist(ChangeSet(entries=[entry]))
        tx.persist(ChangeSet(entries=[entry]))
    assert _balance(store, "pretrain", T0 + H) == before - 5 * CREDIT


def test_a_submission_is_pending_in_the_next_snapshot_and_a_cancelled_one_ends(store: Backend) -> None:
    cycle(store.store, DECIDE, T0 + H)
    store.submit(job("a", gpus=40), job("b", gpus=40), now=T0 + H)  # 40 of 32 GPUs: neither can start
    snap = snapshot(store, T0 + H)
    assert [j.id for j in snap.jobs] == ["a", "b"] and all(j.pending for j in snap.jobs)
    store.cancel("b", T0 + H + 10)
    with store.store.transaction(T0 + H + 10) as tx:
        assert [f.job_id for f in tx.cancelled_pending()] == ["b"]
        assert tx.jobs(["a"])["a"].state is JobState.PENDING
    cycle(store.store, DECIDE, T0 + H + 20)
    with store.store.transaction(T0 + H + 20) as tx:
        facts = tx.jobs(["a", "b"])
    assert facts["a"].state is JobState.PENDING and facts["b"].state is JobState.CANCELLED
    assert [j.id for j in snapshot(store, T0 + H + 20).jobs] == ["a"]


def test_dependencies_and_holds_keep_jobs_out_alike_and_the_unsatisfiable_are_cancelled(store: Backend) -> None:
    cycle(store.store, DECIDE, T0 + H)
    store.submit(
        job("a"), job("b", dependency="afterok:a"), job("c", dependency="afternotok:a"),
        job("d", dependency="afterok:c"), job("h", hold="user"), job("s1", name="sweep"),
        job("s2", name="sweep", dependency="singleton"), now=T0 + H,
    )  # fmt: skip
    started = cycle(store.store, DECIDE, T0 + H + 1)
    assert sorted(s.job_id for s in started.decisions.starts) == ["a", "s1"]
    with store.store.transaction(T0 + H + 2) as tx:
        tx.snapshot(str(tx.state("period")))
        assert {j: r.blocker.value for j, r in tx.gated().items()} == {
            "b": "dependency", "c": "dependency", "d": "dependency", "h": "held", "s2": "dependency",
        }  # fmt: skip
        assert "afterok:a (a is running)" in tx.gated()["b"].message
        assert "singleton (s1 of the same name is running)" in tx.gated()["s2"].message
        assert tx.unsatisfiable() == {}
    end = T0 + H + 100
    hear(store.store, [ExecutorEvent("a", 0, EventKind.EXITED, end, 0)], end)
    with store.store.transaction(end) as tx:
        tx.snapshot(str(tx.state("period")))
        assert sorted(tx.unsatisfiable()) == ["c", "d"]  # d's dependency, c, is cancelled in the same cycle
    report = cycle(store.store, DECIDE, end)
    assert [s.job_id for s in report.decisions.starts] == ["b"]
    with store.store.transaction(end) as tx:
        facts = tx.jobs(["b", "c", "d", "s2"])
    assert {j: f.state for j, f in facts.items()} == {
        "b": JobState.RUNNING, "c": JobState.CANCELLED, "d": JobState.CANCELLED, "s2": JobState.PENDING,
    }  # fmt: skip


def test_a_start_opens_a_run_and_one_launch_delivered_in_order(store: Backend) -> None:
    store.submit(job("a", slice_seconds=2 * H), job("b", budget="detection", user="dana"), now=T0 + H)
    report = cycle(store.store, DECIDE, T0 + H)
    assert sorted(s.job_id for s in report.decisions.starts) == ["a", "b"]
    intents = store.store.undelivered()
    assert [(i.kind, i.attempt) for i in intents] == [(IntentKind.LAUNCH, 0), (IntentKind.LAUNCH, 0)]
    assert sorted(i.job_id for i in intents) == ["a", "b"]
    assert [i.id for i in intents] == sorted(i.id for i in intents)  # delivery order is id order
    launch = next(i for i in intents if i.job_id == "a")
    assert launch.spec is not None and launch.spec.command == ("train", "a") and launch.spec.slice_end == T0 + 3 * H
    store.store.mark_delivered([launch.id], T0 + H)
    assert [i.job_id for i in store.store.undelivered()] == ["b"]
    assert store.store.open_runs() == {"a": 0, "b": 0}
    assert store.store.next_deadline(T0 + H) == T0 + 2 * H  # b's default one-hour slice ends first
    with store.store.transaction(T0 + H) as tx:
        meters = tx.open_meters()
        runs = tx.runs_of([("a", 0), ("a", 1)], lock=False)
    assert [m.job_id for m in meters] == ["a", "b"] and all(m.charged_until == T0 + H for m in meters)
    assert list(runs) == [("a", 0)] and runs[("a", 0)].budget == "pretrain"
    running = {j.id: j for j in snapshot(store, T0 + H).jobs}
    assert running["a"].run is not None and running["a"].run.slice_end == T0 + 3 * H


def test_checkpoint_reports_reach_the_run_with_their_interval(store: Backend) -> None:
    store.submit(job("a", gpus=8), now=T0 + H)
    cycle(store.store, DECIDE, T0 + H)
    # recorded, but no run changed state: a report is no reason to decide at once
    assert hear(store.store, [ExecutorEvent("a", 0, EventKind.CHECKPOINTED, T0 + H + 1800)], T0 + H + 1801) == 0
    hear(store.store, [ExecutorEvent("a", 0, EventKind.CHECKPOINTED, T0 + H + 3000)], T0 + H + 3001)
    run = {j.id: j for j in snapshot(store, T0 + H + 3100).jobs}["a"].run
    assert run is not None and (run.checkpoint_at, run.checkpoint_every) == (T0 + H + 3000, 1200)


def test_charges_are_exact_posted_once_and_count_what_is_not_posted_yet(store: Backend) -> None:
    store.submit(job("a", gpus=8), now=T0 + H)
    cycle(store.store, DECIDE, T0 + H)
    funded = 8000 * CREDIT
    for t in range(T0 + H + 100, T0 + H + 4 * CHARGE_EVERY, 100):  # cycles every 100 s: charged every 300 s
        cycle(store.store, DECIDE, t)
    now = T0 + H + 4 * CHARGE_EVERY - 100 + 50
    with store.store.transaction(now) as tx:
        [meter] = tx.open_meters()
        charged = tx.charged([meter.run_id])
    assert meter.charged_until == T0 + H + 3 * CHARGE_EVERY  # the last periodic charge
    assert charged == {meter.run_id: cost(1, meter.rate, meter.price, 3 * CHARGE_EVERY)}
    # the snapshot's balance is the ledger less what is accrued and not posted: exact at any instant
    assert _balance(store, "pretrain", now) == funded - cost(1, meter.rate, meter.price, now - (T0 + H))


def test_an_exit_ends_the_run_and_the_job_and_charges_the_rest(store: Backend) -> None:
    store.submit(job("a", gpus=8), now=T0 + H)
    cycle(store.store, DECIDE, T0 + H)
    end = T0 + H + 1234
    changed = hear(store.store, [ExecutorEvent("a", 0, EventKind.EXITED, end, 0)], end)
    assert changed == 1
    assert store.store.open_runs() == {}
    with store.store.transaction(end) as tx:
        assert tx.jobs(["a"])["a"].state is JobState.COMPLETED
        total = tx.charged(["a.0"])["a.0"]
        assert tx.open_meters() == []
    rate = to_rate(store)
    assert total == cost(1, rate, 1000, 1234)
    assert _balance(store, "pretrain", end + H) == 8000 * CREDIT - total
    assert "a" not in {j.id for j in snapshot(store, end).jobs}


def test_a_closed_period_refuses_entries_and_the_next_is_funded_afresh(store: Backend) -> None:
    cycle(store.store, DECIDE, T0 + H)
    december = 1_796_083_200  # 2026-12-01T00:00:00Z
    cycle(store.store, DECIDE, december + H)
    with store.store.transaction(december + H) as tx:
        old = tx.period("2026-11-01")
        assert old is not None and old[1] is True
    late = Entry("pretrain", EntryKind.ADJUSTMENT, -CREDIT, T0 + 2 * H, adjust_key("pretrain", "late"), "2026-11-01")
    with pytest.raises(ClosedPeriodError), store.store.transaction(december + H) as tx:
        tx.persist(ChangeSet(entries=[late]))
    assert _balance(store, "pretrain", december + H) == 8000 * CREDIT  # no carry-over in the small example


def test_usage_is_kept_as_persisted(store: Backend) -> None:
    with store.store.transaction(T0) as tx:
        tx.persist(ChangeSet(usage=[UsageUpdate("pretrain", 2.5, T0, new=True)]))
    with store.store.transaction(T0 + 10) as tx:
        tx.persist(ChangeSet(usage=[UsageUpdate("pretrain", 3.5, T0 + 10)]))
    with store.store.transaction(T0 + 10) as tx:
        assert tx.usage()["pretrain"] == (3.5, T0 + 10)


def to_rate(b: Backend) -> int:
    """The full-price rate of an 8-GPU H100 run (credit-microunits per hour)."""
    return 8 * snapshot(b, T0 + H).rates["H100"]


def test_an_array_is_every_task_at_once_and_runs_its_limit_with_its_place_in_each_launch(store: Backend) -> None:
    sweep = job("s", gpus=1, array=parse_array("3,5,7-9%2"), array_id="a-5e0c2b7d9a14", request_id="ann:sweep")
    store.submit(sweep, now=T0 + H)
    store.submit(sweep, now=T0 + H)  # a retry with the request id: nothing twice
    report = cycle(store.store, DECIDE, T0 + H)
    assert sorted(s.job_id for s in report.decisions.starts) == ["a-5e0c2b7d9a14_3", "a-5e0c2b7d9a14_5"]
    with store.store.transaction(T0 + H) as tx:
        tx.snapshot(str(tx.state("period")))
        gated = tx.gated()
        states = [f.state for f in tx.jobs([f"a-5e0c2b7d9a14_{i}" for i in (3, 5, 7, 8, 9)]).values()]
    assert states.count(JobState.PENDING) == 3
    assert sorted(gated) == ["a-5e0c2b7d9a14_7", "a-5e0c2b7d9a14_8", "a-5e0c2b7d9a14_9"]
    assert {r.blocker.value for r in gated.values()} == {"array-limit"}
    launches = {i.job_id: i.spec.array for i in store.store.undelivered() if i.spec is not None}
    assert launches["a-5e0c2b7d9a14_5"] == ArrayPosition("a-5e0c2b7d9a14", 5, 5, 3, 9)


def test_a_dependency_on_an_array_waits_for_every_task(store: Backend) -> None:
    sweep = job("s", gpus=8, array=parse_array("0-1"), array_id="a-0d0e0f0a0b0c")
    store.submit(sweep, job("after", dependency="afterok:a-0d0e0f0a0b0c"), now=T0 + H)
    cycle(store.store, DECIDE, T0 + H)
    first = T0 + H + 60
    hear(store.store, [ExecutorEvent("a-0d0e0f0a0b0c_0", 0, EventKind.EXITED, first, 0)], first)
    report = cycle(store.store, DECIDE, first)
    assert report.decisions.starts == ()  # one task still runs
    with store.store.transaction(first) as tx:
        tx.snapshot(str(tx.state("period")))
        assert "afterok:a-0d0e0f0a0b0c (a-0d0e0f0a0b0c is running)" in tx.gated()["after"].message
    last = first + 60
    hear(store.store, [ExecutorEvent("a-0d0e0f0a0b0c_1", 0, EventKind.EXITED, last, 0)], last)
    assert [s.job_id for s in cycle(store.store, DECIDE, last).decisions.starts] == ["after"]
