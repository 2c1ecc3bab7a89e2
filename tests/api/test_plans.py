"""The budgeting process through the API: diff, atomic apply with an audit record and ledger adjustments, the lead's
limits, and a plan with one bad entry changing nothing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from allotment.store.tables import AuditRow, BudgetRow, LedgerEntryRow, MembershipRow, WindowRow
from tests.api.conftest import Api

PLAN = """\
period: 2026-11-01
why: evals move to detection for the December push
budgets:
  - name: detection
    allocation: 6500
    members:
      - {user: dana, role: member}
      - {user: eli, role: member}
      - {user: chen, role: member}
  - name: segmentation
    allocation: 3000
    max_gpus: 16
  - name: vision-evals
    parent: vision
    allocation: 500
windows:
  - id: nightly-detection-evals
    budget: detection
    cluster: lab
    gpu_type: H100
    gpus: 16
    start: 2026-11-11T22:00:00Z
    end: 2026-11-12T06:00:00Z
"""


def _state(api: Api) -> dict[str, Any]:
    with api.rig.sessions() as s:
        return {
            "budgets": sorted((b.name, b.parent, b.allocation_micro, b.max_gpus) for b in s.scalars(select(BudgetRow))),
            "members": sorted((m.budget, m.user, m.role) for m in s.scalars(select(MembershipRow))),
            "windows": sorted((w.id, w.budget, w.gpus, w.start, w.end) for w in s.scalars(select(WindowRow))),
            "ledger": sorted((e.budget, e.kind, e.amount_micro) for e in s.scalars(select(LedgerEntryRow))),
            "audit": len(list(s.scalars(select(AuditRow)))),
        }


def test_a_lead_diffs_and_applies_a_plan_for_their_subtree(api: Api) -> None:
    api.rig.step()  # the engine opens the period: leaves get their allocations
    before = _state(api)
    diff = api.call("POST", "/plans/diff", "dana", {"yaml": PLAN})
    assert diff.status_code == 200, diff.text
    changes = {(c["kind"], c["target"], c["field"]): (c["old"], c["new"]) for c in diff.json()["changes"]}
    assert changes[("budget", "detection", "allocation")] == (6_000_000_000, 6_500_000_000)
    assert changes[("budget", "segmentation", "allocation")] == (4_000_000_000, 3_000_000_000)
    assert changes[("budget", "segmentation", "max_gpus")] == (8, 16)
    assert changes[("budget", "vision-evals", "created")][1]["parent"] == "vision"
    assert changes[("member", "detection", "chen")] == (None, "member")
    assert changes[("window", "detection", "nightly-detection-evals")][1]["gpus"] == 16
    assert _state(api) == before  # a diff writes nothing

    api.wake.clear()
    applied = api.call("POST", "/plans/apply", "dana", {"yaml": PLAN})
    assert applied.status_code == 200, applied.text
    assert api.wake.is_set() and applied.json()["changes"] == diff.json()["changes"]
    after = _state(api)
    assert ("vision-evals", "vision", 500_000_000, None) in after["budgets"]
    assert ("detection", "chen", "member") in after["members"]
    assert ("nightly-detection-evals", "detection", 16, 1794434400, 1794463200) in after["windows"]
    adjustments = sorted((b, a) for b, k, a in after["ledger"] if k == "adjustment")
    assert adjustments == [("detection", 500_000_000), ("segmentation", -1_000_000_000)]
    assert ("vision-evals", "allocation", 500_000_000) in after["ledger"]
    with api.rig.sessions() as s:
        record = s.get(AuditRow, applied.json()["audit_id"])
        assert record is not None
        assert (record.actor, record.action, record.why) == (
            "dana",
            "plan.apply",
            "evals move to detection for the December push",
        )
        assert record.at == api.rig.clock.now() and len(record.detail["changes"]) == len(diff.json()["changes"])
    tree = {b["name"]: b for b in api.call("GET", "/budgets", "eli").json()["budgets"]}
    assert tree["segmentation"]["remaining_micro"] == 3_000_000_000
    assert tree["vision"]["remaining_micro"] == 10_000_000_000
    again = api.call("POST", "/plans/diff", "dana", {"yaml": PLAN})
    assert again.json()["changes"] == []


def test_a_plan_with_one_bad_entry_changes_nothing(api: Api) -> None:
    api.rig.step()
    before = _state(api)
    bad = PLAN.replace("gpus: 16\n    start", "gpus: 64\n    start").replace("{user: chen,", "{user: zoe,")
    response = api.call("POST", "/plans/apply", "ada", {"yaml": bad})
    assert response.status_code == 422, response.text
    problems = {p["field"]: p for p in response.json()["problems"]}
    assert problems["windows[0].gpus"]["line"] == 21 and "32 GPUs" in problems["windows[0].gpus"]["reason"]
    assert problems["budgets[0].members[2].user"]["line"] == 9
    over = PLAN.replace("allocation: 6500", "allocation: 7000")
    response = api.call("POST", "/plans/apply", "ada", {"yaml": over})
    assert response.status_code == 422 and "more than its 10000" in response.text
    assert _state(api) == before


def test_leads_stay_inside_their_subtree_and_plans_are_for_the_current_period(api: Api) -> None:
    own = "period: 2026-11-01\nwhy: x\nbudgets:\n  - {name: vision, allocation: 9000}\n"
    assert api.call("POST", "/plans/apply", "dana", {"yaml": own}).status_code == 403
    other = "period: 2026-11-01\nwhy: x\nbudgets:\n  - {name: pretrain, allocation: 7000}\n"
    assert api.call("POST", "/plans/apply", "dana", {"yaml": other}).status_code == 403
    grant = (
        "period: 2026-11-01\nwhy: x\nbudgets:\n  - name: segmentation\n    allocation: 4000\n"
        "    members: [{user: eli, role: admin}]\n"
    )
    assert api.call("POST", "/plans/apply", "dana", {"yaml": grant}).status_code == 403
    stale = "period: 2026-10-01\nwhy: x\nbudgets:\n  - {name: segmentation, allocation: 4000}\n"
    assert api.call("POST", "/plans/apply", "ada", {"yaml": stale}).status_code == 409
    no_why = "period: 2026-11-01\nbudgets:\n  - {name: segmentation, allocation: 3000}\n"
    response = api.call("POST", "/plans/apply", "ada", {"yaml": no_why})
    assert response.status_code == 422 and response.json()["problems"][0]["field"] == "why"
    assert api.call("POST", "/plans/apply", "ada", {"yaml": no_why, "why": "trim"}).status_code == 200
