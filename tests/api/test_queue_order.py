"""`GET /jobs/queue`: pending jobs in scheduling order (estimated start, jobs without one last, then submission),
each with the blocker the engine wrote, page by page."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from allotment.store.tables import PendingReasonRow
from tests.api.conftest import Api


def waiting(api: Api, count: int) -> list[str]:
    """`count` jobs over pretrain's 24-GPU limit: they wait whatever runs; the engine writes their reasons."""
    ids = []
    for i in range(count):
        ids.append(api.submit("ben", "pretrain", name=f"w{i}", resources={"gpus": 8, "replicas": 4}))
        api.rig.clock.t += 1  # one submission a second: submission order is unambiguous
    api.rig.step()
    return ids


def estimate(api: Api, starts: dict[str, int | None]) -> None:
    """Give the jobs the estimated starts a later cycle could have written."""
    with api.rig.sessions.begin() as session:
        for job_id, start in starts.items():
            session.execute(
                update(PendingReasonRow).where(PendingReasonRow.job_id == job_id).values(estimated_start=start)
            )


@pytest.mark.parametrize(
    ("offsets", "order"),
    [
        pytest.param([None, None, None], [0, 1, 2], id="no-estimates-by-submission"),
        pytest.param([None, 600, 300], [2, 1, 0], id="estimated-first-soonest-first"),
        pytest.param([900, 900, 60], [2, 0, 1], id="same-estimate-by-submission"),
    ],
)
def test_the_queue_is_in_scheduling_order_page_by_page(api: Api, offsets: list[int | None], order: list[int]) -> None:
    ids = waiting(api, 3)
    now = api.rig.clock.now()
    estimate(api, {j: None if o is None else now + o for j, o in zip(ids, offsets, strict=True)})
    whole = api.call("GET", "/jobs/queue", "dana").json()  # the queue is visible to every user
    assert [q["id"] for q in whole["items"]] == [ids[i] for i in order] and whole["total"] == 3
    assert {q["blocker"] for q in whole["items"]} == {"limit"}
    assert all("limit of 24" in q["message"] for q in whole["items"])
    seen, cursor = [], None
    while True:
        page = api.call("GET", "/jobs/queue", "ben", params={"limit": 1, **({"cursor": cursor} if cursor else {})})
        seen += [q["id"] for q in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == [ids[i] for i in order]


def test_the_queue_filters_by_budget_and_user_and_refuses_a_foreign_cursor(api: Api) -> None:
    ids = waiting(api, 2)
    other = api.submit("eli", "segmentation", resources={"gpus": 8, "replicas": 2})
    api.rig.step()
    assert [q["id"] for q in api.call("GET", "/jobs/queue?budget=pretrain", "eli").json()["items"]] == ids
    assert [q["id"] for q in api.call("GET", "/jobs/queue?user=eli", "ben").json()["items"]] == [other]
    bad = api.call("GET", "/jobs/queue?cursor=bm9wZQ", "ben")
    assert bad.status_code == 400 and "cursor" in bad.json()["message"]
    assert api.call("GET", "/jobs/queue", None).status_code == 401
