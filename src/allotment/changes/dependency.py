"""Job dependencies as sbatch writes them: the text of `--dependency` and its one typed form.

Owns: the syntax — `TYPE:ID[:ID…]` parts joined by `,` (every part must hold) or by `?` (any one is enough), the
types `after` (each job named has started, or was cancelled), `afterany` (ended in any way), `afterok` (completed),
`afternotok` (failed, was cancelled or lost) and `singleton` (no other job of the same user and name runs, and none
submitted earlier is still active) — `parse` from text to a `Dependency` with the limits of what is accepted and a
clear message for each refusal (Slurm's `after:ID+MINUTES`, `aftercorr`, `afterburstbuffer` and `expand` are not
supported), and `Dependency.text`, the canonical text stored in jobs.dependency and shown in job views.

Must not: say when a dependency holds (changes.eligibility does, from the states of the jobs it names), or check
that the jobs named exist (service.dependencies does, at submission).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

MAX_DEPENDENCY_JOBS = 100
"""The most job ids one dependency may name (bounded input, decision 52)."""
MAX_DEPENDENCY_CHARS = 4000
"""The longest dependency text accepted (the column jobs.dependency holds this many characters)."""
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class DependencyKind(StrEnum):
    AFTER = "after"  # each job named has started (or was cancelled before it did)
    AFTERANY = "afterany"  # each job named has ended, in any way
    AFTEROK = "afterok"  # each job named completed successfully (exit 0)
    AFTERNOTOK = "afternotok"  # each job named failed, was cancelled or was lost


SINGLETON = "singleton"
_KINDS = {k.value: k for k in DependencyKind}
_SUPPORTED = ", ".join([*_KINDS, SINGLETON])


class DependencyError(ValueError):
    """A dependency text that is not accepted; the message says why."""


@dataclass(frozen=True, slots=True)
class Clause:
    """One job another job waits for, and how."""

    kind: DependencyKind
    job_id: str

    @property
    def text(self) -> str:
        return f"{self.kind.value}:{self.job_id}"


@dataclass(frozen=True, slots=True)
class Dependency:
    """A parsed dependency: its clauses in the order written (each job once per kind), `singleton`, and whether the
    clauses are alternatives (`?`) or must all hold (`,`)."""

    clauses: tuple[Clause, ...]
    singleton: bool = False
    any_of: bool = False

    @property
    def job_ids(self) -> tuple[str, ...]:
        """The jobs named, each once, in the order written."""
        return tuple(dict.fromkeys(c.job_id for c in self.clauses))

    @property
    def text(self) -> str:
        """The canonical text: consecutive clauses of one kind written as one part (`afterok:A:B`) when all must hold;
        alternatives each as a part of their own (`afterok:A?afterok:B`: in sbatch's syntax every job of a `?`
        dependency is an alternative, so that is what `afterok:A:B?afterany:C` means too)."""
        parts: list[str] = []
        last: DependencyKind | None = None
        for c in self.clauses:
            if c.kind is last and not self.any_of:
                parts[-1] += f":{c.job_id}"
            else:
                parts.append(c.text)
                last = c.kind
        if self.singleton:
            parts.append(SINGLETON)
        return ("?" if self.any_of else ",").join(parts)


@lru_cache(maxsize=4096)
def parse(text: str) -> Dependency:
    """The dependency `text` names (sbatch's --dependency syntax); raises DependencyError saying what is wrong. The
    result is cached by text: the snapshot loader parses the stored text of every waiting job each cycle."""
    text = text.strip()
    if not text:
        raise DependencyError("the dependency is empty: give TYPE:JOB_ID[:JOB_ID…], e.g. afterok:j-3f9c0a1b2c3d")
    if len(text) > MAX_DEPENDENCY_CHARS:
        raise DependencyError(f"the dependency is longer than {MAX_DEPENDENCY_CHARS} characters")
    if "," in text and "?" in text:
        raise DependencyError("join the parts of a dependency with ',' (all must hold) or '?' (any one), not both")
    any_of = "?" in text
    clauses: dict[Clause, None] = {}
    singleton = False
    for part in text.split("?" if any_of else ","):
        if not part.strip():
            raise DependencyError("the dependency has an empty part: TYPE:JOB_ID parts joined by ',' or '?'")
        kind, _, rest = part.strip().partition(":")
        if kind == SINGLETON:
            if rest:
                raise DependencyError("singleton names no jobs: it waits for the jobs of the same user and name")
            if any_of:
                raise DependencyError("singleton cannot be an alternative ('?'): join it with ','")
            singleton = True
            continue
        if kind not in _KINDS:
            raise DependencyError(f"unknown dependency type {kind!r} (supported: {_SUPPORTED})")
        ids = rest.split(":") if rest else []
        if not ids:
            raise DependencyError(f"{kind} needs at least one job id: {kind}:JOB_ID[:JOB_ID…]")
        for job_id in ids:
            if "+" in job_id:
                raise DependencyError(f"{kind}:JOB_ID+MINUTES (a delay after the start) is not supported")
            if not _JOB_ID.match(job_id):
                raise DependencyError(f"{job_id!r} in {kind} is not a job id")
            clauses[Clause(_KINDS[kind], job_id)] = None
    if len({c.job_id for c in clauses}) > MAX_DEPENDENCY_JOBS:
        raise DependencyError(f"a dependency names at most {MAX_DEPENDENCY_JOBS} jobs")
    return Dependency(tuple(clauses), singleton, any_of)
