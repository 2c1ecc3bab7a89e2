"""Running a scenario's policies × seeds, one after another or in parallel processes.

Owns: a Task (scenario file, policy, seed, store), running one in the current process (the workload built for that
seed in a scratch folder of its own, the simulation run, its metrics computed) and running many with `jobs`
worker processes (concurrent.futures; results come back in task order whatever finishes first, so a report does not
depend on `jobs`). Only Metrics and a few counts cross the process boundary, never a whole SimResult.

Must not: format reports (report.py) or parse command lines (cli/simulate.py).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from allotment.sim import metrics
from allotment.sim.metrics import Metrics
from allotment.sim.runner import Simulation
from allotment.sim.scenario import build_workload, load_scenario, make_policy


@dataclass(frozen=True, slots=True)
class Task:
    scenario: Path
    policy: str
    seed: int
    store: str = "memory"


@dataclass(frozen=True, slots=True)
class Done:
    task: Task
    metrics: Metrics
    cycles: int
    events: int
    wall_seconds: float
    notes: tuple[str, ...]


def run_task(task: Task, progress: Callable[[float], None] | None = None) -> Done:
    spec = load_scenario(task.scenario)
    with tempfile.TemporaryDirectory() as scratch:
        workload = build_workload(spec, Path(scratch), task.seed)
        options = dataclasses.replace(spec.options(task.seed), store=task.store)
        result = Simulation(workload, make_policy(task.policy), options, label=task.policy).run(progress)
    return Done(task, metrics.compute(result), result.cycles, result.events, result.wall_seconds, workload.notes)


def run_all(tasks: Sequence[Task], jobs: int = 1, done: Callable[[Done], None] | None = None) -> list[Done]:
    """Every task's result, in task order. `jobs` > 1 runs them in that many worker processes; `done` is told of
    each as it finishes (in finishing order)."""
    if jobs <= 1 or len(tasks) <= 1:
        out = []
        for t in tasks:
            out.append(run_task(t))
            if done is not None:
                done(out[-1])
        return out
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
        futures = [pool.submit(run_task, t) for t in tasks]
        if done is not None:
            for f in as_completed(futures):
                done(f.result())
        return [f.result() for f in futures]
