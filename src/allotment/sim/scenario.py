"""Scenario files: what `allot simulate SCENARIO` runs, validated at the edge with pydantic.

Owns: the scenario model (a synthetic workload on an organisation's configuration, or a real trace; the
simulation settings: seed, resolution, faults; the default policies), loading it from YAML with clear errors, building
its `Workload`, and mapping a policy name to a Policy ("allotment" is the full Allotment policy, every other name
comes from `allotment.policies.make_policy`). Paths in a scenario are relative to the scenario file.

Must not: run simulations (runner.py) or write reports (report.py).
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from allotment import policies as baselines
from allotment.config.fields import Duration
from allotment.config.gpus import GpuRule
from allotment.core.cycle import AllotmentPolicy
from allotment.core.policy import Policy
from allotment.sim.joblist import job_list_workload
from allotment.sim.runner import Faults, SimOptions
from allotment.sim.synthetic import SyntheticSpec, generate
from allotment.sim.traces import Replay, Sizing, TraceError, trace_workload
from allotment.sim.workload import Workload

ALLOTMENT = "allotment"


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message says where and why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyntheticWorkload(SyntheticSpec):
    organisation: Path
    """An Allotment configuration file (fleet, budgets, users, policy)."""


def _edge(value: Any) -> Any:
    """YAML reads 2017-10-15 as a date: keep it as the text it was."""
    if isinstance(value, date | datetime):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


WindowEdge = Annotated[str, BeforeValidator(_edge)]


class TraceWorkload(_Model):
    kind: Literal["itp", "philly", "csv"]
    path: Path
    """ITP: the folder of clusterNN.csv(.gz); Philly: philly.csv(.gz); csv: a job list (docs/simulation.md)."""
    organisation: Path | None = None
    """csv only: the Allotment configuration the jobs run in (default: one generated as for the traces)."""
    gpus: GpuRule = GpuRule.REFUSE
    """Rows with fractional or zero GPUs: refused (the default) or rounded up (`round-up`; config/gpus.py)."""
    sizing: Sizing = Sizing.CONTENDED
    nodes: dict[str, int] | None = None
    """Fixed 8-GPU nodes per budget (e.g. {vc-c01: 10}), replacing `sizing`: each budget alone on its nodes, or
    with `shared: true` all of them pooled in one cluster."""
    shared: bool = False
    days: float | None = Field(default=None, gt=0)
    """Replay only the first `days` days after `skip_days` (default: the whole trace)."""
    skip_days: float = Field(default=0, ge=0)
    start: WindowEdge | None = Field(default=None, alias="from")
    """The window's start instead of `skip_days`: an offset (7d) or, for a trace with dates, a date (2017-10-15)."""
    end: WindowEdge | None = Field(default=None, alias="to")
    """The window's end instead of `days`: an offset or a date."""
    drain_days: float = Field(default=7, ge=0)

    @model_validator(mode="after")
    def _organisation_for_lists(self) -> TraceWorkload:
        if self.organisation is not None and self.kind != "csv":
            raise ValueError("`organisation` is for job lists (kind: csv); ITP and Philly generate their own")
        if self.organisation is not None and self.nodes is not None:
            raise ValueError("give `nodes` or `organisation`, not both: the organisation has its own fleet")
        if (self.start is not None or self.end is not None) and (self.days is not None or self.skip_days):
            raise ValueError("give the window as `from`/`to` or as `skip_days`/`days`, not both")
        if self.shared and self.nodes is None:
            raise ValueError("`shared` pools the budgets' fixed `nodes`: give `nodes` too")
        return self


class WorkloadSpec(_Model):
    synthetic: SyntheticWorkload | None = None
    trace: TraceWorkload | None = None

    @model_validator(mode="after")
    def _one(self) -> WorkloadSpec:
        if (self.synthetic is None) == (self.trace is None):
            raise ValueError("give exactly one of `synthetic` or `trace`")
        return self


class FaultSpec(_Model):
    per_node_day: float = Field(default=0.0, ge=0)
    hard_fraction: float = Field(default=0.2, ge=0, le=1)
    repair: Duration = 4 * 3600


class SimulationSpec(_Model):
    resolution: Duration = Field(default=1, ge=1)
    """Events within this many seconds are handled by one cycle (default 1 s: event-driven time)."""
    idle_gap: Duration = 900
    faults: FaultSpec = Field(default_factory=FaultSpec)
    report_checkpoints: bool = True
    """Jobs that checkpoint report each checkpoint to the scheduler (rule `least-lost-work`); false: none does."""


class Scenario(_Model):
    name: str = Field(min_length=1, max_length=200)
    seed: int = 1
    workload: WorkloadSpec
    simulation: SimulationSpec = Field(default_factory=SimulationSpec)
    policies: tuple[str, ...] = (ALLOTMENT,)

    def options(self, seed: int | None = None) -> SimOptions:
        f = self.simulation.faults
        return SimOptions(
            seed=self.seed if seed is None else seed,
            resolution=self.simulation.resolution,
            idle_gap=self.simulation.idle_gap,
            faults=Faults(f.per_node_day, f.hard_fraction, f.repair),
            report_checkpoints=self.simulation.report_checkpoints,
        )


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario; relative paths become relative to the file's folder."""
    try:
        data: Any = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ScenarioError(f"{path}: {problems}") from None
    base = path.resolve().parent
    w = scenario.workload
    if w.synthetic is not None:
        w = WorkloadSpec(synthetic=w.synthetic.model_copy(update={"organisation": base / w.synthetic.organisation}))
    elif w.trace is not None:
        org = w.trace.organisation
        update = {"path": base / w.trace.path, "organisation": None if org is None else base / org}
        w = WorkloadSpec(trace=w.trace.model_copy(update=update))
    return scenario.model_copy(update={"workload": w})


def build_workload(scenario: Scenario, scratch: Path, seed: int | None = None) -> Workload:
    """The scenario's jobs (generated or imported); trace organisations are written under `scratch`."""
    w = scenario.workload
    if w.synthetic is not None:
        spec = SyntheticSpec.model_validate(w.synthetic.model_dump(exclude={"organisation"}))
        return generate(w.synthetic.organisation, spec, scenario.seed if seed is None else seed, scenario.name)
    assert w.trace is not None
    t = w.trace
    replay = Replay(t.sizing, t.days, t.skip_days, t.drain_days, t.gpus, t.nodes, t.shared, start=t.start, end=t.end)
    try:
        if t.kind == "csv":
            return job_list_workload(t.path, scratch, replay, organisation_file=t.organisation)
        return trace_workload(t.kind, t.path, scratch, replay)
    except TraceError as exc:
        raise ScenarioError(str(exc)) from None


def make_policy(name: str) -> Policy:
    """ "allotment": the full Allotment policy; any other name: the baseline of that name (allotment.policies)."""
    if name == ALLOTMENT:
        return AllotmentPolicy()
    if name not in baselines.policy_names():
        raise ScenarioError(f"unknown policy {name!r} (choose: {', '.join(policy_names())})")
    return baselines.make_policy(name)


def policy_names() -> tuple[str, ...]:
    return (ALLOTMENT, *baselines.policy_names())
