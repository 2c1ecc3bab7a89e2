"""The runs a report was made from, kept beside it (`runs.json`) so runs made apart can make one report.

Owns: writing every run's task (scenario, policy, seed, store), counts, notes and Metrics to `runs.json` in a form
that reads back equal (NaN included), reading such files back, and the checks that make several of them one
comparison: the same scenario file name and title, and each policy and seed at most once.
Must not: run simulations (batch.py), compute metrics (metrics.py) or render the report (report.py).

A full-scale evaluation (14 days, 5 policies × 5 seeds) takes hours of one core; with this file its runs can be
made in several commands, on several machines, or a policy re-run after a change, then combined with
`allot simulate --combine DIR,DIR --out DIR` into the report one command would have written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from allotment.sim.batch import Done

FILE = "runs.json"
VERSION = 1


class RunFileError(ValueError):
    """A runs.json that is missing, unreadable, or cannot be combined with the others."""


@dataclass(frozen=True, slots=True)
class Runs:
    title: str
    scenario: str
    runs: tuple[Done, ...]


_DONE = TypeAdapter(list[Done])


def save(out: Path, title: str, scenario: Path, done: Sequence[Done]) -> Path:
    """Write `out/runs.json`: the scenario's title and file name, and every run."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILE
    body = {"version": VERSION, "title": title, "scenario": scenario.name, "runs": [asdict(d) for d in done]}
    path.write_text(json.dumps(body, indent=1, default=str))
    return path


def load(folder: Path) -> Runs:
    """The runs saved in `folder` (a report folder or the runs.json in it)."""
    path = folder if folder.name == FILE else folder / FILE
    if not path.is_file():
        raise RunFileError(f"{path}: no such file; give a folder `allot simulate --out` wrote (it holds {FILE})")
    try:
        body = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFileError(f"{path}: not a runs file ({exc})") from None
    if not isinstance(body, dict) or body.get("version") != VERSION:
        raise RunFileError(f"{path}: not a version-{VERSION} runs file; run its simulation again to rewrite it")
    try:
        runs = _DONE.validate_python(body.get("runs"))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunFileError(f"{path}: runs.{where}: {first['msg']}") from None
    return Runs(str(body.get("title", "")), str(body.get("scenario", "")), tuple(runs))


def combine(folders: Sequence[Path]) -> Runs:
    """The runs of every folder as one comparison, in the order given; refuses different scenarios and a policy's
    seed present twice."""
    if not folders:
        raise RunFileError("--combine: give at least one report folder")
    parts = [(f, load(f)) for f in folders]
    first_folder, first = parts[0]
    seen: dict[tuple[str, int], Path] = {}
    runs: list[Done] = []
    for folder, part in parts:
        if (part.scenario, part.title) != (first.scenario, first.title):
            raise RunFileError(
                f"{folder}: runs of {part.scenario} ({part.title}), not of {first.scenario} ({first.title}) "
                f"as in {first_folder}; combine runs of one scenario"
            )
        for d in part.runs:
            key = (d.task.policy, d.task.seed)
            if key in seen:
                raise RunFileError(
                    f"{folder}: {key[0]} seed {key[1]} is also in {seen[key]}; combine each policy's seed once"
                )
            seen[key] = folder
            runs.append(d)
    return Runs(first.title, first.scenario, tuple(runs))
