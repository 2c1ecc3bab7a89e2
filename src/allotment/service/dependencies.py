"""Dependencies at submission (sbatch --dependency): the jobs a spec's dependency names must exist and be visible.

Owns: reading, once per batch, the jobs the batch's dependencies name (`named_jobs`), the problem of a spec naming a
job that does not exist or that the submitter may not see (both read "no job X you can see": a dependency does not
reveal which ids exist), and `with_dependency`, a dependency given beside the spec that replaces the spec's own
(sbatch's --dependency option over an #SBATCH line).

Must not: say when a dependency holds (changes.eligibility does, in every cycle), parse the text
(changes.dependency does), or start or cancel anything (the engine is the single writer of scheduling state).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.changes.dependency import DependencyError, parse
from allotment.service.errors import FieldProblem, Invalid
from allotment.service.principal import Principal
from allotment.service.specs import JobSpec
from allotment.service.yamlinput import Document
from allotment.store.db import in_batches
from allotment.store.tables import JobRow


def named_jobs(session: Session, specs: Iterable[JobSpec]) -> dict[str, tuple[str, str]]:
    """Job id → (user, budget) of every existing job the specs' dependencies name, and of every job array they name by
    its id (its tasks share their user and budget)."""
    ids = sorted({jid for spec in specs if spec.dependency is not None for jid in spec.dependency.job_ids})
    found: dict[str, tuple[str, str]] = {}
    for batch in in_batches(ids):
        for jid, user, budget in session.execute(
            select(JobRow.id, JobRow.user, JobRow.budget).where(JobRow.id.in_(batch))
        ):
            found[jid] = (user, budget)
    for batch in in_batches([jid for jid in ids if jid not in found]):
        for array_id, user, budget in session.execute(
            select(JobRow.array_id, JobRow.user, JobRow.budget).where(JobRow.array_id.in_(batch)).distinct()
        ):
            if array_id is not None:
                found[array_id] = (user, budget)
    return found


def problems(
    doc: Document[JobSpec],
    principal: Principal,
    named: Mapping[str, tuple[str, str]],
    parents: Mapping[str, str | None],
) -> list[FieldProblem]:
    """The jobs the spec's dependency names that do not exist or that `principal` may not see, as problems."""
    dep = doc.value.dependency
    if dep is None:
        return []
    missing = [
        jid
        for jid in dep.job_ids
        if (found := named.get(jid)) is None
        or (found[0] != principal.user and not principal.may_view_budget_jobs(found[1], parents))
    ]
    if not missing:
        return []
    return [doc.problem(("dependency",), f"no job {', '.join(missing)} that {principal.user} can see")]


def with_dependency(doc: Document[JobSpec], text: str) -> Document[JobSpec]:
    """The spec with `text` as its dependency in place of its own; Invalid when the text is not a dependency."""
    try:
        dep = parse(text)
    except DependencyError as exc:
        raise Invalid.of("dependency", str(exc)) from None
    return replace(doc, value=doc.value.model_copy(update={"dependency": dep}))
