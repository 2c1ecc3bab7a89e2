"""decide() gives exactly the decisions recorded in tests/core/fixtures/decide_equivalence.pickle.gz.

The fixture holds, for a set of Ai2-scale snapshots (several seeds and instants: capacity windows ahead and open,
drained, cordoned, forced and down nodes, nearly exhausted budgets and tight limits, tight headroom, a second root,
and later cycles of a multi-round run with carried reservations, victims in their grace period and backfill), the
snapshot, `now` and the Decisions the policy gave when the fixture was recorded. Performance work on the core must
keep every decision equal: starts with their placements and GPU indices, preemptions, renewals, lapses, reservations,
every pending reason (blocker, message, numbers, estimated start, hints), drain estimates and standings.

The snapshots are stored rather than rebuilt so that changes to the sample workload or the test driver cannot make
this test fail. Record again (only when a decision is meant to change) with
    PYTHONPATH=. .venv/bin/python -m tests.core.test_equivalence
"""

from __future__ import annotations

import gzip
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Decisions
from allotment.core.model import Account, Budget, Node, NodeState, Seconds, Snapshot

FIXTURE = Path(__file__).parent / "fixtures" / "decide_equivalence.pickle.gz"
HOUR = 3600

Case = tuple[Snapshot, Seconds, Decisions]


def _load() -> dict[str, Case]:
    with gzip.open(FIXTURE, "rb") as fh:
        cases: dict[str, Case] = pickle.load(fh)
    return cases


CASES = _load() if FIXTURE.exists() else {}


def test_the_fixture_is_there() -> None:
    assert len(CASES) >= 10, f"{FIXTURE} is missing or incomplete; record it (see the module docstring)"


@pytest.mark.parametrize("name", sorted(CASES))
def test_decide_gives_the_recorded_decisions(name: str) -> None:
    snapshot, now, expected = CASES[name]
    got = AllotmentPolicy().decide(snapshot, now)
    assert got.starts == expected.starts
    assert got.preempts == expected.preempts
    assert got.renews == expected.renews
    assert got.lapses == expected.lapses
    assert got.reserves == expected.reserves
    assert got.drain_estimates == expected.drain_estimates
    assert got.standings == expected.standings
    assert list(got.pending) == list(expected.pending)  # the same jobs, in the same order
    differing = [job for job, reason in expected.pending.items() if got.pending[job] != reason]
    assert not differing, f"{len(differing)} reasons differ, e.g. {differing[0]}: {got.pending[differing[0]]}"


# -- recording -----------------------------------------------------------------------------------------------------


def _degraded(snap: Snapshot) -> Snapshot:
    """Every 17th node draining, every 29th down, every 41st cordoned, the 100th drained by force."""
    nodes: list[Node] = []
    for i, node in enumerate(snap.nodes):
        if i == 100:
            nodes.append(replace(node, state=NodeState.DRAINING, forced=True))
        elif i % 29 == 5:
            nodes.append(replace(node, state=NodeState.DOWN))
        elif i % 17 == 3:
            nodes.append(replace(node, state=NodeState.DRAINING))
        elif i % 41 == 7:
            nodes.append(replace(node, state=NodeState.CORDONED))
        else:
            nodes.append(node)
    return replace(snap, nodes=tuple(nodes))


def _poor(snap: Snapshot) -> Snapshot:
    """Balances cut to 2 % (every third budget slightly negative) and GPU limits on a third of the non-root budgets."""
    accounts: dict[str, Account] = {}
    for i, (name, acc) in enumerate(sorted(snap.accounts.items())):
        balance = -acc.balance // 500 if i % 3 == 0 else acc.balance // 50
        accounts[name] = Account(balance, acc.usage)
    budgets: list[Budget] = []
    for i, b in enumerate(snap.budgets):
        tighter = b.parent is not None and i % 3 == 0
        budgets.append(replace(b, max_gpus=24 + 8 * (i % 5)) if tighter else b)
    return replace(snap, accounts=accounts, budgets=tuple(budgets))


def _tight_headroom(snap: Snapshot) -> Snapshot:
    policy = replace(snap.policy, default_headroom=48, headroom={}, headroom_max_grace=120, session_max_per_user=3)
    return replace(snap, policy=policy)


def _rounds(snap: Snapshot, now: Seconds, at: list[Seconds]) -> list[tuple[str, Snapshot, Seconds]]:
    """Later cycles of a run driven by the core test driver (victims leave, jobs finish, reservations carry)."""
    from tests.core.driver import Driver

    durations = {j.id: 600 + (int(j.id.split("-")[-1]) * 7919) % (6 * HOUR) for j in snap.jobs}
    drv = Driver(snap, durations=durations, now=now)
    out: list[tuple[str, Snapshot, Seconds]] = []
    for t in at:
        drv._advance(t)
        current = drv.current()
        out.append((f"+{t - now}s", current, drv.now))
        drv._apply(AllotmentPolicy().decide(current, drv.now))
    return out


def build_cases() -> list[tuple[str, Snapshot, Seconds]]:
    """The snapshots the fixture records (needs the examples and benchmarks folders: run from the repo root)."""
    from benchmarks.snapshots import AI2, scaled

    from allotment.cli.sample import default_now, sample_snapshot
    from allotment.config import load_config

    cfg = load_config(AI2)
    now = default_now(cfg)  # the olmo window on titan is open; the nightly window on neptune opens in 8 h

    def sample(seed: int, at: Seconds, pending: int = 3000) -> Snapshot:
        return sample_snapshot(cfg, seed=seed, now=at, pending=pending)

    nightly = now + 9 * HOUR  # the nightly window is open
    before_olmo = now - 3 * 24 * HOUR - 17 * HOUR  # the olmo window opens in 3 h
    out = [
        ("seed1", sample(1, now), now),
        ("seed2-nightly-window", sample(2, nightly), nightly),
        ("seed3-window-ahead", sample(3, before_olmo), before_olmo),
        ("seed4-degraded-nodes", _degraded(sample(4, now)), now),
        ("seed5-low-balances-and-limits", _poor(sample(5, now)), now),
        ("seed6-tight-headroom", _tight_headroom(sample(6, nightly)), nightly),
        ("seed7-two-copies", scaled(sample(7, now, 1500), 2), now),
        ("seed8-full-backlog", sample(8, now, 10_000), now),
        ("seed9-degraded-and-poor", _poor(_degraded(sample(9, before_olmo))), before_olmo),
    ]
    for label, snap, at in _rounds(sample(10, now, 2000), now, [now, now + 60, now + 700, now + 2 * HOUR]):
        out.append((f"seed10-rounds{label}", snap, at))
    for label, snap, at in _rounds(_degraded(sample(11, nightly, 2000)), nightly, [nightly + 30, nightly + HOUR]):
        out.append((f"seed11-degraded-rounds{label}", snap, at))
    return out


def record() -> None:
    cases: dict[str, Any] = {}
    for name, snap, at in build_cases():
        cases[name] = (snap, at, AllotmentPolicy().decide(snap, at))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(FIXTURE, "wb", compresslevel=9) as fh:
        pickle.dump(cases, fh, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"recorded {len(cases)} cases in {FIXTURE} ({FIXTURE.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    record()
