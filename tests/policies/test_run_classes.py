"""What a baseline start is charged and protected as: batch work runs with no slice at full price, a session holds
its requested length as its time limit (the old scheduler's work above a team limit is covered in test_priority)."""

from __future__ import annotations

import pytest

from allotment.core.model import RunClass
from allotment.policies import policy_names
from tests.core.builders import HOUR, two_team_world
from tests.policies.helpers import decide


@pytest.mark.parametrize("policy", policy_names())
def test_batch_work_gets_no_slice_and_a_session_holds_its_length(policy: str) -> None:
    w = two_team_world(2).pending("batch", "red", 8, submitted_at=1).session("sess", "blue", 2, length=3 * HOUR)
    starts = {s.job_id: (s.run_class, s.slice_end) for s in decide(policy, w, now=100).decisions.starts}
    assert starts == {"batch": (RunClass.GUARANTEED, None), "sess": (RunClass.SESSION, 100 + 3 * HOUR)}
