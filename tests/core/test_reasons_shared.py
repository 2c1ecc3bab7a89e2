"""Explain-waiting computes one reason per job shape and blocker and hands it to every job of that shape (a cache
within the cycle). A shared reason must be the one each job would get on its own: here every case's reasons are
compared with those computed for each job afresh (the Explainer's caches of whole reasons and hints switched off)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from allotment.core import reasons
from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import Seconds, Snapshot
from tests.core.test_equivalence import build_cases

CASES = build_cases()


class _Forgetful(dict[Any, Any]):
    """A cache that keeps nothing."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


@pytest.fixture
def fresh_reasons(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    original = reasons.Explainer.__init__

    def init(self: reasons.Explainer, st: Any) -> None:
        original(self, st)
        self._reasons = _Forgetful()
        self._hints = _Forgetful()

    with monkeypatch.context() as m:
        m.setattr(reasons.Explainer, "__init__", init)
        yield


@pytest.mark.parametrize(("snapshot", "now"), [(s, t) for _, s, t in CASES], ids=[n for n, _, _ in CASES])
def test_a_shared_reason_is_the_one_the_job_would_get_on_its_own(
    snapshot: Snapshot, now: Seconds, request: pytest.FixtureRequest
) -> None:
    shared = AllotmentPolicy().decide(snapshot, now).pending
    request.getfixturevalue("fresh_reasons")
    alone = AllotmentPolicy().decide(snapshot, now).pending
    assert list(shared) == list(alone)
    differing = [job for job in shared if shared[job] != alone[job]]
    assert not differing, (
        f"{len(differing)} reasons differ, e.g. {differing[0]}: {shared[differing[0]]} vs {alone[differing[0]]}"
    )
