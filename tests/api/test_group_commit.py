"""Submissions by group commit (service.intake, service.jobs.submit_jobs): a batch is one transaction, yet every
request gets its own answer — a refused request changes nothing and refuses no other — and what the batch answers
is what the database holds. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from allotment.service.errors import Conflict, Forbidden, Invalid, ServiceError
from allotment.service.intake import Intake
from allotment.service.jobs import SubmitRequest, get_job, submit_jobs
from allotment.service.principal import Principal
from allotment.service.specs import spec_from_data
from allotment.service.tokens import authenticate
from allotment.service.views import Submitted
from allotment.service.yamlinput import Document
from allotment.store.tables import JobEventRow, JobRow
from tests.api.conftest import Api


def _request(api: Api, user: str, request_id: str | None = None, **spec: Any) -> SubmitRequest:
    principal = authenticate(api.ctx, api.tokens[user])
    body = {"budget": "pretrain", "command": ["train"], "resources": {"gpus": 8}, **spec}
    return SubmitRequest(principal, spec_from_data(body), request_id)


def _jobs_in_database(api: Api) -> dict[str, int]:
    """job id → number of history records."""
    with api.rig.sessions() as s:
        ids = list(s.scalars(select(JobRow.id)))
        events = list(s.scalars(select(JobEventRow.job_id)))
    return {i: events.count(i) for i in ids}


def test_each_request_of_a_batch_gets_its_own_answer(api: Api) -> None:
    stranger = Principal("zed", {}, admin=True)  # not a configured user (gone meanwhile): its insert fails
    batch = [
        _request(api, "ben"),  # ben is a member of pretrain
        _request(api, "ben", budget="nowhere"),  # unknown budget
        _request(api, "dana"),  # dana is not a member of pretrain
        _request(api, "ben", "r1", name="first"),
        _request(api, "ben", "r1", name="first"),  # the same request again, inside the same batch
        _request(api, "ben", "r1", command=["other"]),  # the same request id for another submission
        SubmitRequest(stranger, _request(api, "ben").doc),
        _request(api, "ben", resources={"gpus": 4}),
    ]
    answers = submit_jobs(api.ctx, batch)

    assert [type(a).__name__ for a in answers] == [
        "Submitted",
        "Invalid",
        "Forbidden",
        "Submitted",
        "Submitted",
        "Conflict",
        "Conflict",
        "Submitted",
    ]
    assert isinstance(answers[1], Invalid) and "unknown budget 'nowhere'" in answers[1].message
    assert isinstance(answers[2], Forbidden) and isinstance(answers[5], Conflict) and isinstance(answers[6], Conflict)
    made = [a for a in answers if isinstance(a, Submitted)]
    assert [a.created for a in made] == [True, True, False, True]
    assert made[1].job.id == made[2].job.id  # the retry names the job its first use created
    # the database holds exactly the accepted jobs, each with its first history record
    assert _jobs_in_database(api) == {made[0].job.id: 1, made[1].job.id: 1, made[3].job.id: 1}
    # and what the batch answered is what the job's own page shows
    ben = authenticate(api.ctx, api.tokens["ben"])
    for answer in (made[0], made[1], made[3]):
        assert get_job(api.ctx, ben, answer.job.id) == answer.job


def test_a_retry_in_a_later_batch_finds_the_job(api: Api) -> None:
    [first] = submit_jobs(api.ctx, [_request(api, "ben", "again")])
    [retry, other] = submit_jobs(api.ctx, [_request(api, "ben", "again"), _request(api, "ben", "fresh")])
    assert isinstance(first, Submitted) and isinstance(retry, Submitted) and isinstance(other, Submitted)
    assert (retry.created, retry.job.id, other.created) == (False, first.job.id, True)
    assert len(_jobs_in_database(api)) == 2


def test_concurrent_submissions_share_commits_and_each_gets_its_job(api: Api) -> None:
    intake = Intake(api.ctx)
    requests = [_request(api, "ben", f"c{i}", name=f"job-{i}") for i in range(60)]

    async def all_at_once() -> list[Submitted]:
        return list(await asyncio.gather(*(intake.submit(r) for r in requests)))

    answers = asyncio.run(all_at_once())
    assert [a.job.name for a in answers] == [f"job-{i}" for i in range(60)]
    assert len({a.job.id for a in answers}) == 60 and all(a.created for a in answers)
    assert intake.batches < 60  # requests that waited together were written together
    assert set(_jobs_in_database(api)) == {a.job.id for a in answers}


def test_a_refused_request_raises_to_its_own_caller_only(api: Api) -> None:
    intake = Intake(api.ctx)

    async def two() -> list[Submitted | BaseException]:
        good, bad = _request(api, "ben"), _request(api, "ben", budget="nowhere")
        return list(await asyncio.gather(intake.submit(good), intake.submit(bad), return_exceptions=True))

    good, bad = asyncio.run(two())
    assert isinstance(good, Submitted) and isinstance(bad, Invalid)
    assert list(_jobs_in_database(api)) == [good.job.id]


def test_a_submission_that_breaks_its_batch_fails_alone(api: Api) -> None:
    """A submission that trips something no check foresaw (here a priority the database cannot store, built past the
    spec's validation) fails its whole transaction; the intake writes the others again one at a time, so only its
    own caller hears the error."""
    intake = Intake(api.ctx)
    good = [_request(api, "ben", f"g{i}", name=f"good-{i}") for i in range(20)]
    broken = _request(api, "ben", "broken")
    broken = SubmitRequest(
        broken.principal, Document(broken.doc.value.model_copy(update={"priority": 10**30})), "broken"
    )
    requests = [*good[:10], broken, *good[10:]]

    async def all_at_once() -> list[Submitted | BaseException]:
        return list(await asyncio.gather(*(intake.submit(r) for r in requests), return_exceptions=True))

    answers = asyncio.run(all_at_once())
    assert [isinstance(a, Submitted) for a in answers] == [True] * 10 + [False] + [True] * 10
    assert not isinstance(answers[10], Submitted | ServiceError)  # an unexpected failure, answered 500 by the API
    assert set(_jobs_in_database(api)) == {a.job.id for a in answers if isinstance(a, Submitted)}
