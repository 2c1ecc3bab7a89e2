"""Which pending jobs the scheduler may consider: the one eligibility gate every store's snapshot passes through.

Owns: the rules that keep a pending job out of the scheduling snapshot, and the reason such a job waits:
 - holds (Slurm's JobHeldUser / JobHeldAdmin: `HOLD_USER` set by its owner or anyone who may manage it, `HOLD_ADMIN`
   set by an administrator and released only by one); the reason names the hold and who may release it;
 - dependencies (sbatch --dependency, syntax in changes.dependency): `after` holds once each job named has started
   or ended, `afterany` once each has ended, `afterok` once each completed, `afternotok` once each failed, was
   cancelled or was lost, `singleton` while no other job of the same user and name runs and none submitted earlier
   is still pending; parts joined by `,` must all hold, by `?` one is enough. A job whose dependency is not yet
   satisfied waits with blocker `dependency`, its reason naming each part that holds it ("afterok:J1 (J1 is
   running)"). A dependency that can never be satisfied (afterok on a job that failed, afternotok on one that
   completed, a job that does not exist) is `Unsatisfiable`: the cycle cancels the job with that reason
   (changes.decisions.never_satisfied), held or not. A job cancelled so, or whose cancellation was asked, counts as
   cancelled for the jobs that depend on it in the same cycle, so a chain ends at once (`screen`);
 - array limits: a task of a job array with a limit (`%N`, Slurm's JobArrayTaskLimit) is kept out while N tasks of
   its array are active: of its waiting tasks (pending, not being cancelled, let through by every other rule here)
   only the first N - active by index reach the core, so however many the policy starts in one cycle, at most N run
   at once (`array_throttle`, after `screen`).
A kept-out job is never seen by `core.decide`, so it is never started, planned or counted as demand, and its reason
is written beside the ones decide() explains (changes.steps.reason_changes).

Must not: read anything (changes.snapshot.assemble hands it each pending job's facts, and those of the jobs their
dependencies name), decide who may hold or release a job (service.holds does) or which jobs a submission may name
(service.dependencies does), or schedule anything (allotment.core does, for the jobs it lets through).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from allotment.changes.dependency import Clause, Dependency, DependencyError, DependencyKind, parse
from allotment.core.decisions import Blocker, WaitReason
from allotment.core.jobstate import FINAL, JobState
from allotment.core.model import Job, Seconds

HOLD_USER = "user"
"""Held by its owner (or a lead or administrator acting as one): anyone who may manage the job releases it."""
HOLD_ADMIN = "admin"
"""Held by an administrator: only an administrator releases it."""
HOLDS: tuple[str, ...] = (HOLD_USER, HOLD_ADMIN)

_HELD_MESSAGE = {
    HOLD_USER: "held by its owner (user hold): not considered until released (allot release {job})",
    HOLD_ADMIN: "held by an administrator (admin hold): not considered until an administrator releases it",
}
_RUNNING = frozenset({JobState.RUNNING, JobState.PREEMPTING})
_STATE_WORDS = {
    JobState.PENDING: "is pending",
    JobState.RUNNING: "is running",
    JobState.PREEMPTING: "is preempting",
    JobState.COMPLETED: "completed",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "was cancelled",
    JobState.LOST: "was lost",
}


@dataclass(frozen=True, slots=True)
class Named:
    """A job some waiting job's dependency names, as the gate needs it."""

    state: JobState
    started: bool
    """It has started at least once (an attempt was made), even if it waits again now (requeued)."""


@dataclass(frozen=True, slots=True)
class Namesake:
    """An active job of the same user and name as a job with a singleton dependency."""

    job_id: str
    state: JobState
    submitted_at: Seconds


@dataclass(frozen=True, slots=True)
class DependencyFacts:
    """What the store read for the waiting jobs' dependencies: the jobs named (absent: no such job), and for each job
    with a singleton dependency the active jobs of its user and name (it may be among them)."""

    named: Mapping[str, Named] = field(default_factory=dict)
    namesakes: Mapping[str, Sequence[Namesake]] = field(default_factory=dict)


NO_FACTS = DependencyFacts()


def array_named(tasks: Sequence[Named]) -> Named:
    """A job array named by its id (`afterok:a-…`, Slurm's dependency on an array job) as one job: active while any
    task is (running if one runs), else completed when every task completed, otherwise failed, lost or cancelled
    (in that order: the worst end among its tasks); started once any task has started."""
    states = [t.state for t in tasks]
    started = any(t.started for t in tasks)
    if not states:
        return Named(JobState.CANCELLED, started)
    if any(s in _RUNNING for s in states):
        return Named(JobState.RUNNING, started)
    if JobState.PENDING in states:
        return Named(JobState.PENDING, started)
    for worst in (JobState.FAILED, JobState.LOST, JobState.CANCELLED):
        if worst in states:
            return Named(worst, started)
    return Named(JobState.COMPLETED, started)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pending job the gate looks at: one with a hold or a dependency (the text as stored)."""

    job: Job
    hold: str | None = None
    dependency: str | None = None


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """A dependency that can never be satisfied: the job is cancelled with `reason`."""

    reason: str


Verdict = WaitReason | Unsatisfiable


def held_reason(job: Job, hold: str) -> WaitReason:
    """Why a held job waits: which hold, and who may release it."""
    return WaitReason(Blocker.HELD, _HELD_MESSAGE[hold].format(job=job.id), job.total_gpus, 0, None)


@dataclass(slots=True)
class ArrayLoad:
    """One limited array's tasks as a snapshot loader saw them (changes.snapshot.assemble counts them)."""

    limit: int
    """The most tasks that may run at once (`%N`)."""
    gpus: int
    """GPUs one task holds (every task asks for the same)."""
    active: int = 0
    """Tasks holding GPUs: running, preempting, or pending while a run has not ended yet."""
    waiting: list[tuple[int, str]] = field(default_factory=list)
    """The pending tasks every other rule of the gate lets through: (index, job id)."""


def array_limit_reason(array_id: str, load: ArrayLoad) -> WaitReason:
    """Why a task of a limited array waits: the limit, named (its text does not change while it waits, so the reason
    is written once, not each time a task of the array starts or ends)."""
    message = (
        f"its array {array_id} runs at most {load.limit} tasks at once (%{load.limit}): it starts after one of"
        " them ends"
    )
    return WaitReason(Blocker.ARRAY_LIMIT, message, load.gpus, 0, None)


def array_throttle(loads: Iterable[tuple[str, ArrayLoad]]) -> dict[str, WaitReason]:
    """The tasks the `%N` rule keeps out this cycle, with why (one reason per array): of each array's waiting tasks
    (those `gate` let through), all but the first `limit - active` by index."""
    kept: dict[str, WaitReason] = {}
    for array_id, load in loads:
        ready = sorted(load.waiting)
        room = max(load.limit - load.active, 0)
        if len(ready) <= room:
            continue
        reason = array_limit_reason(array_id, load)
        for _, jid in ready[room:]:
            kept[jid] = reason
    return kept


def dependency_of(text: str | None) -> Dependency | Unsatisfiable | None:
    """The stored dependency text parsed (cached by text); one that cannot be read (never written by the service)
    can never be satisfied."""
    if text is None:
        return None
    try:
        return parse(text)
    except DependencyError as exc:
        return Unsatisfiable(f"its dependency {text!r} cannot be read: {exc}")


def wanted(candidates: Sequence[Candidate]) -> tuple[list[str], list[str]]:
    """What the store must read for `screen`: the ids of the jobs the dependencies name, and the ids of the jobs
    with a singleton dependency (whose namesakes it reads)."""
    named: dict[str, None] = {}
    singletons: list[str] = []
    for c in candidates:
        dep = dependency_of(c.dependency)
        if isinstance(dep, Dependency):
            named.update(dict.fromkeys(dep.job_ids))
            if dep.singleton:
                singletons.append(c.job.id)
    return sorted(named), singletons


def gate(
    job: Job, hold: str | None, dependency: str | None = None, facts: DependencyFacts = NO_FACTS
) -> Verdict | None:
    """Why the pending `job` may not be considered by the scheduler this cycle (a WaitReason), that it is to be
    cancelled (Unsatisfiable), or None when it may be considered (an array task it lets through is then counted by
    `array_throttle`, so a task kept out by any rule here takes no place in `%N`)."""
    waits: WaitReason | None = None
    dep = dependency_of(dependency)
    if isinstance(dep, Unsatisfiable):
        return dep
    if dep is not None:
        verdict = _dependency_verdict(job, dep, facts)
        if isinstance(verdict, Unsatisfiable):
            return verdict
        waits = verdict
    if hold is not None:
        return held_reason(job, hold)
    return waits


def screen(
    candidates: Sequence[Candidate], facts: DependencyFacts, cancelling: Collection[str] = ()
) -> dict[str, Verdict]:
    """The gate over every candidate: job id → its verdict, for those kept out. `cancelling`: the pending jobs whose
    cancellation was asked (they end this cycle). A job that ends as cancelled this cycle — asked, or its own
    dependency unsatisfiable — counts as cancelled for the jobs that name it or share its name, so a chain ends at
    once: those are looked at again until no new job is found unsatisfiable."""
    out: dict[str, Verdict] = {}
    gone = set(cancelling)
    todo: Sequence[Candidate] = candidates
    while True:
        if gone:
            facts = _without(facts, gone)
        doomed: set[str] = set()
        for c in todo:
            v = gate(c.job, c.hold, c.dependency, facts)
            if v is None:
                out.pop(c.job.id, None)
                continue
            if isinstance(v, Unsatisfiable):
                doomed.add(c.job.id)
            out[c.job.id] = v
        if not doomed:
            return out
        gone = doomed
        todo = [
            c
            for c in candidates
            if isinstance(d := dependency_of(c.dependency), Dependency)
            and (d.singleton or not gone.isdisjoint(d.job_ids))
            and not isinstance(out.get(c.job.id), Unsatisfiable)
        ]


def _without(facts: DependencyFacts, cancelled: set[str]) -> DependencyFacts:
    """`facts` with the jobs in `cancelled` ended as cancelled."""
    named = {jid: Named(JobState.CANCELLED, n.started) if jid in cancelled else n for jid, n in facts.named.items()}
    namesakes = {jid: [n for n in ns if n.job_id not in cancelled] for jid, ns in facts.namesakes.items()}
    return DependencyFacts(named, namesakes)


def _clause(c: Clause, named: Named | None) -> tuple[bool | None, str]:
    """Whether the clause holds (True), never will (False) or not yet (None), and the named job's state in words."""
    if named is None:
        return False, f"{c.job_id} does not exist"
    state = named.state
    words = f"{c.job_id} {_STATE_WORDS[state]}"
    if state is JobState.PENDING and named.started:
        words += " again (requeued)"
    ended = state in FINAL
    if c.kind is DependencyKind.AFTER:
        return (True if named.started or ended else None), words
    if c.kind is DependencyKind.AFTERANY:
        return (True if ended else None), words
    if c.kind is DependencyKind.AFTEROK:
        return (state is JobState.COMPLETED if ended else None), words
    return (state is not JobState.COMPLETED if ended else None), words  # afternotok


def _singleton(job: Job, namesakes: Sequence[Namesake]) -> str | None:
    """What keeps a singleton job waiting: another job of its user and name that runs, or one submitted earlier
    that still waits (Slurm's rule); None when nothing does."""
    for n in namesakes:
        if n.job_id != job.id and n.state in _RUNNING:
            return f"{n.job_id} of the same name {_STATE_WORDS[n.state]}"
    earlier = sorted(
        (n.submitted_at, n.job_id)
        for n in namesakes
        if n.state is JobState.PENDING and (n.submitted_at, n.job_id) < (job.submitted_at, job.id)
    )
    if earlier:
        return f"{earlier[0][1]} of the same name, submitted earlier, is pending"
    return None


def _dependency_verdict(job: Job, dep: Dependency, facts: DependencyFacts) -> WaitReason | Unsatisfiable | None:
    never: list[str] = []
    waiting: list[str] = []
    for c in dep.clauses:
        holds, words = _clause(c, facts.named.get(c.job_id))
        if holds is True:
            if dep.any_of:
                return None
            continue
        (never if holds is False else waiting).append(f"{c.text} ({words})")
    if dep.singleton:
        blocker = _singleton(job, facts.namesakes.get(job.id, ()))
        if blocker is not None:
            waiting.append(f"singleton ({blocker})")
    if dep.any_of:
        if not waiting:
            return Unsatisfiable("dependency never satisfied: none of " + ", ".join(never) + " can be")
        return WaitReason(
            Blocker.DEPENDENCY, "waits for any one of its dependencies: " + " or ".join(waiting), job.total_gpus, 0,
            None,
        )  # fmt: skip
    if never:
        return Unsatisfiable("dependency never satisfied: " + ", ".join(never))
    if waiting:
        return WaitReason(
            Blocker.DEPENDENCY, "waits for its dependency: " + ", ".join(waiting), job.total_gpus, 0, None
        )
    return None
