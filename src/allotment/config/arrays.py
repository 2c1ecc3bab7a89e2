"""Job arrays' index expressions and task ids (sbatch --array), the one rule every layer reads them by.

Owns: `parse_array` for Slurm's expression (`0-999`, `1,3,5-9:2`, an optional `%N` limit on the tasks run at once),
bounded before anything is expanded (config.limits: at most MAX_ARRAY_TASKS tasks, indices 0…MAX_ARRAY_INDEX, no
index twice), `compact` that writes indices back as the shortest expression (`0-49,60`), and the ids: an array is
`a-<hex>` and its task with index i is `a-<hex>_i` (Slurm's `123_7`), so any client tells an array from a job by
its id alone (`is_array_id`, `task_id`, `split_task_id`).

Must not: know jobs, stores or the network (standard library only: the CLI, the service and the stores share it).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from allotment.config.limits import MAX_ARRAY_CHARS, MAX_ARRAY_INDEX, MAX_ARRAY_TASKS

ARRAY_PREFIX = "a-"
_PART = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
_ARRAY_ID = re.compile(r"^a-[0-9a-f]{1,32}$")
_TASK_ID = re.compile(r"^(a-[0-9a-f]{1,32})_(\d{1,7})$")


@dataclass(frozen=True, slots=True)
class ArrayRange:
    """An array's task indices, ascending and distinct, and the most of them that may run at once (None: any)."""

    indices: tuple[int, ...]
    limit: int | None = None

    @property
    def expression(self) -> str:
        """The normalised expression: `compact(indices)` and `%limit` when there is one."""
        return compact(self.indices) + (f"%{self.limit}" if self.limit is not None else "")


def parse_array(text: str) -> ArrayRange:
    """The indices and limit of an expression; ValueError saying what is wrong (counts are checked before any range
    is expanded, so `0-999999999` costs nothing)."""
    text = text.strip()
    if not text:
        raise ValueError("give the task indices, e.g. 0-99 or 1,3,5-9:2, optionally with %N (at most N at once)")
    if len(text) > MAX_ARRAY_CHARS:
        raise ValueError(f"an array expression has at most {MAX_ARRAY_CHARS} characters")
    body, sep, limit_text = text.partition("%")
    limit: int | None = None
    if sep:
        if not limit_text.isdigit() or int(limit_text) < 1:
            raise ValueError(f"%{limit_text}: the limit of tasks run at once must be a whole number of 1 or more")
        limit = int(limit_text)
    parts: list[range] = []
    total = 0
    for part in body.split(","):
        match = _PART.match(part.strip())
        if match is None:
            raise ValueError(f"{part.strip()!r} is not an index, a range A-B or a stepped range A-B:S")
        start = int(match[1])
        end = int(match[2]) if match[2] is not None else start
        step = int(match[3]) if match[3] is not None else 1
        if end < start:
            raise ValueError(f"{part.strip()!r}: the range ends before it starts")
        if step < 1:
            raise ValueError(f"{part.strip()!r}: the step must be 1 or more")
        if end > MAX_ARRAY_INDEX:
            raise ValueError(f"{part.strip()!r}: an index is at most {MAX_ARRAY_INDEX}")
        r = range(start, end + 1, step)
        total += len(r)
        if total > MAX_ARRAY_TASKS:
            raise ValueError(f"an array has at most {MAX_ARRAY_TASKS} tasks ({text} has more)")
        parts.append(r)
    indices = sorted(i for r in parts for i in r)
    for a, b in pairwise(indices):
        if a == b:
            raise ValueError(f"index {a} is named twice")
    return ArrayRange(tuple(indices), limit)


def compact(indices: Iterable[int]) -> str:
    """The indices as runs of consecutive numbers: `0-49,60,62-63` (sorted first; empty for none)."""
    ordered = sorted(set(indices))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)


def new_array_id() -> str:
    return ARRAY_PREFIX + uuid.uuid4().hex[:12]


def task_id(array_id: str, index: int) -> str:
    """The job id of the array's task with this index (Slurm's `123_7`)."""
    return f"{array_id}_{index}"


def is_array_id(text: str) -> bool:
    """True for an array's own id (`a-<hex>`), not one of its tasks'."""
    return _ARRAY_ID.match(text) is not None


def split_task_id(text: str) -> tuple[str, int] | None:
    """(array id, index) of a task's id, or None for any other id."""
    match = _TASK_ID.match(text)
    return (match[1], int(match[2])) if match is not None else None


def bracketed(array_id: str, indices: Sequence[int], limit: int | None = None) -> str:
    """Tasks shown as squeue shows an array's pending ones: `a-1f2e_[8-999%50]` (one index: `a-1f2e_8`)."""
    if len(indices) == 1 and limit is None:
        return task_id(array_id, indices[0])
    return f"{array_id}_[{compact(indices)}" + (f"%{limit}" if limit is not None else "") + "]"
