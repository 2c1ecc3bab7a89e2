"""Updating a pending job (Slurm's `scontrol update job`): its priority, GPUs, replicas, slice, time limit, GPU types,
clusters or name.

Owns: the JobUpdate request (every field optional, each with the type the job spec gives it: service.specs), who may
update a job (as cancel: its owner, a lead of its budget's subtree, an administrator), that only a pending job is
updated (409 otherwise), building the job's spec as it would be after the update and putting it through exactly the
checks a submission passes (service.jobs.request_problems, pydantic's model first), so a refused update changes
nothing, and the one transaction that writes the changed columns, raises the job's revision (the engine's snapshot
cache reads the job again: changes.snapshot) and leaves an audit record of each field's before and after.

Must not: start, stop or place anything (the engine is the single writer of scheduling state; it sees the updated
job in its next cycle, woken by `ctx.notify`), or check a spec itself (service.specs and service.jobs do).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select
from sqlalchemy.orm import Session

from allotment.config.fields import Duration, Name
from allotment.core.jobstate import JobState
from allotment.service.context import Context
from allotment.service.errors import Conflict, FieldProblem, Forbidden, Invalid
from allotment.service.jobs import request_problems, slice_of, summary, visible_job
from allotment.service.principal import Principal, budget_parents
from allotment.service.shapes import NodeKind, PoolShape, read_kinds, read_shapes
from allotment.service.specs import Choices, GpuCount, JobSpec, Priority, Replicas, spec_from_data
from allotment.service.views import FieldChange, JobUpdated
from allotment.store.records import audit
from allotment.store.tables import ClusterRow, JobRow


class JobUpdate(BaseModel):
    """What to change in a pending job; every field left out stays as it is. Each has the type and bounds the job
    spec gives it (docs/api.md, "Job specs")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    priority: Priority | None = None
    """Orders the job among its own budget's jobs only."""
    gpus: GpuCount | None = None
    """GPUs per replica."""
    replicas: Replicas | None = None
    slice: Duration | None = None
    """The run slice asked for (a session: its length), within the policy's limits."""
    max_runtime: Duration | None = None
    """The time limit (sbatch --time): the longest a run may last before the job is ended."""
    gpu_types: Choices | None = None
    """Allowed GPU types; an empty list allows any."""
    clusters: Choices | None = None
    """Allowed clusters; an empty list allows any."""
    name: Name | None = None


FIELDS: tuple[tuple[str, str], ...] = (
    ("name", "name"),
    ("priority", "priority"),
    ("gpus", "gpus"),
    ("replicas", "replicas"),
    ("slice", "slice_seconds"),
    ("max_runtime", "max_runtime"),
    ("gpu_types", "gpu_types"),
    ("clusters", "clusters"),
)
"""Each field an update may change, and the jobs table's column that holds it."""


def update_job(ctx: Context, principal: Principal, job_id: str, update: JobUpdate) -> JobUpdated:
    """Change what a pending job asks for, when the job as changed passes every check a submission passes."""
    asked = update.model_dump(exclude_none=True)
    if not asked:
        raise Invalid.of("", "give at least one field to change: " + ", ".join(f for f, _ in FIELDS))
    with ctx.sessions.begin() as session:
        row = visible_job(session, principal, job_id)
        if not principal.may_manage_job(row.user, row.budget, budget_parents(session)):
            raise Forbidden(f"{principal.user} may not update {job_id}: it is {row.user}'s job in {row.budget}")
        if row.state != JobState.PENDING.value:
            raise Conflict(
                f"job {job_id} is {row.state}: only a pending job can be updated (requeue a running one with"
                " `allot requeue --hold`, update it, then release it)"
            )
        if row.cancel_requested_at is not None:
            raise Conflict(f"job {job_id} is being cancelled: it cannot be updated")
        spec = _checked(ctx, fleet_facts(session), _spec_data(row, asked))
        after = _values(spec, ctx, asked.get("name", row.name))
        changes = [
            FieldChange(field=f, before=_value(getattr(row, column)), after=after[f])
            for f, column in FIELDS
            if _value(getattr(row, column)) != after[f]
        ]
        if changes:
            now = ctx.now()
            for change in changes:
                setattr(row, dict(FIELDS)[change.field], change.after)
            row.revision, row.updated_at = row.revision + 1, now
            audit(session, at=now, actor=principal.user, action="jobs.update", target=job_id,
                  detail={c.field: [c.before, c.after] for c in changes})  # fmt: skip
        result = JobUpdated(job=summary(row), changes=changes)
    if changes:
        ctx.notify()
    return result


Fleet = tuple[set[str], list[PoolShape], list[NodeKind]]
"""The fleet facts a spec is checked against: cluster names, pool shapes, node kinds."""


def fleet_facts(session: Session) -> Fleet:
    """The fleet facts, read in the transaction that writes."""
    return set(session.scalars(select(ClusterRow.name))), read_shapes(session), read_kinds(session)


def _spec_data(row: JobRow, asked: dict[str, Any]) -> dict[str, Any]:
    """The job's spec as plain data, as it would be after the update (its name is checked only when it changes: a
    name given at submission was checked then, and one taken from the command's first word need not be a Name)."""
    stored = dict(row.spec or {})
    data: dict[str, Any] = {
        "budget": row.budget,
        "command": list(stored.get("command") or []),
        "env": dict(stored.get("env") or {}),
        "resources": {
            "gpus": asked.get("gpus", row.gpus),
            "replicas": asked.get("replicas", row.replicas),
            "gpu_types": list(asked.get("gpu_types", row.gpu_types) or []),
            "clusters": list(asked.get("clusters", row.clusters) or []),
            "cpus": row.cpus,
            "memory": row.memory_mib,
        },
        "contract": {
            "class": row.contract,
            "slice": asked.get("slice", row.slice_seconds),
            "fallback_opportunistic": row.fallback_opportunistic,
        },
        "kind": row.kind,
        "priority": asked.get("priority", row.priority),
        "grace": row.grace,
        "requeue": row.requeue,
    }
    for key in ("image", "workdir"):
        if stored.get(key) is not None:
            data[key] = stored[key]
    if "name" in asked:
        data["name"] = asked["name"]
    max_runtime = asked.get("max_runtime", row.max_runtime)
    if max_runtime is not None:
        data["max_runtime"] = max_runtime
    return data


def _checked(ctx: Context, facts: Fleet, data: dict[str, Any]) -> JobSpec:
    """The updated spec after every check a submission's spec passes; Invalid names the update's fields."""
    try:
        doc = spec_from_data(data)
    except Invalid as exc:
        raise _renamed(exc.problems) from None
    known, shapes, kinds = facts
    problems = request_problems(ctx, doc, known, shapes, kinds)
    if problems:
        raise _renamed(problems)
    return doc.value


def _renamed(problems: tuple[FieldProblem, ...] | list[FieldProblem]) -> Invalid:
    """The problems under the update's field names (`resources.gpus` is `gpus`, `contract.slice` is `slice`)."""
    named = [FieldProblem(p.field.removeprefix("resources.").removeprefix("contract."), p.reason) for p in problems]
    return Invalid("the update is refused: " + "; ".join(str(p) for p in named), named)


def _values(spec: JobSpec, ctx: Context, name: str) -> dict[str, Any]:
    r = spec.resources
    return {
        "name": name,
        "priority": spec.priority,
        "gpus": r.gpus,
        "replicas": r.replicas,
        "slice": slice_of(spec, ctx.policy),
        "max_runtime": spec.max_runtime,
        "gpu_types": list(r.gpu_types),
        "clusters": list(r.clusters),
    }


def _value(column: object) -> object:
    return list(column) if isinstance(column, list | tuple) else column
