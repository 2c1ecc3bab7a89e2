"""Job specs: what a user asks to run, in a shape close to Slurm, dstack and Beaker.

Owns: the JobSpec model (name, budget, command as an argv list or a shell-like string split with shlex, image, env,
workdir, resources {gpus, cpus and memory per replica, replicas, gpu_types, clusters}, contract {class, slice,
fallback_opportunistic}, kind, priority, grace, max_runtime, requeue, hold, array, dependency — sbatch --dependency
text, parsed once here into changes.dependency's typed form), `parse_spec` for YAML text with field, line and reason
for every problem, and `spec_from_data` for JSON. Durations are seconds or strings like 30m, 8h, 2d; memory is MiB or
strings like 512M, 16G; an array is Slurm's `--array` expression, `0-999%50` (config.arrays). Unknown keys are
errors; a spec names no user: jobs always run as the authenticated user. An omitted slice or grace stays None here:
the server's policy supplies it (service.jobs), so every client gets the same default.

Must not: check what depends on the deployment (the budget, the fleet, the policy's limits): service.jobs does.
"""

from __future__ import annotations

import shlex
from decimal import Decimal
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from allotment.changes.dependency import MAX_DEPENDENCY_CHARS, Dependency, DependencyError
from allotment.changes.dependency import parse as parse_dependency
from allotment.config.arrays import ArrayRange, parse_array
from allotment.config.fields import Cpus, Duration, Memory, Name, Text
from allotment.config.gpus import whole_gpus
from allotment.config.limits import (
    MAX_ARG_CHARS,
    MAX_ARGS,
    MAX_CHOICES,
    MAX_ENV_ENTRIES,
    MAX_ENV_NAME,
    MAX_ENV_VALUE,
    MAX_GPUS_PER_REPLICA,
    MAX_IMAGE,
    MAX_LAUNCH_CHARS,
    MAX_REPLICAS,
    MAX_WORKDIR,
)
from allotment.core.model import ContractClass, JobKind
from allotment.executors.environment import is_managed
from allotment.service.yamlinput import Document, from_data, from_text, validate

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_PRIORITY = 1000


def _argv(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"the command cannot be split into arguments: {exc}") from None
    return value


def _env_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal):
        return str(value)
    return value


def _dependency(value: Any) -> Dependency:
    if isinstance(value, Dependency):
        return value
    if not isinstance(value, str):
        raise ValueError("give the dependency as text, e.g. afterok:j-3f9c0a1b2c3d:j-4a5b6c7d8e9f,singleton")
    if len(value) > MAX_DEPENDENCY_CHARS:
        raise ValueError(f"the dependency is longer than {MAX_DEPENDENCY_CHARS} characters")
    try:
        return parse_dependency(value)
    except DependencyError as exc:
        raise ValueError(str(exc)) from None


DependencySpec = Annotated[
    Dependency,
    PlainValidator(_dependency),
    PlainSerializer(lambda d: d.text, return_type=str),
    WithJsonSchema({"type": "string", "maxLength": MAX_DEPENDENCY_CHARS}),
]
"""sbatch's --dependency text (changes.dependency), parsed into its typed form at the edge."""

Argument = Annotated[Text, Field(min_length=1, max_length=MAX_ARG_CHARS)]
"""One argument of a command: no NUL byte, 1 to MAX_ARG_CHARS characters."""
Argv = Annotated[list[Argument], BeforeValidator(_argv), Field(min_length=1, max_length=MAX_ARGS)]
EnvName = Annotated[str, Field(pattern=ENV_NAME, max_length=MAX_ENV_NAME)]
EnvValue = Annotated[Text, BeforeValidator(_env_value), Field(max_length=MAX_ENV_VALUE)]
Choices = Annotated[tuple[Name, ...], Field(max_length=MAX_CHOICES)]
"""GPU types or clusters a job allows (any when empty)."""
Env = Annotated[dict[EnvName, EnvValue], Field(max_length=MAX_ENV_ENTRIES)]
"""A job's environment: at most MAX_ENV_ENTRIES variables (config.limits)."""


def launch_chars(command: list[str] | tuple[str, ...], env: dict[str, str]) -> str | None:
    """Why argv and environment together are too large to start a process with, or None."""
    total = sum(len(a) + 1 for a in command) + sum(len(k) + len(v) + 2 for k, v in env.items())
    if total > MAX_LAUNCH_CHARS:
        return f"the command and env together hold {total} characters; a job may have at most {MAX_LAUNCH_CHARS}"
    return None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _gpu_count(value: object) -> object:
    """Fractional and zero GPU counts are refused with the one rule (config/gpus.py); other types go on to StrictInt."""
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        try:
            too_many = value > MAX_GPUS_PER_REPLICA
        except ArithmeticError:  # a Decimal NaN: whole_gpus says it is not a number
            too_many = False
        if too_many:
            raise ValueError(f"a replica has at most {MAX_GPUS_PER_REPLICA} GPUs (got {value})")
        return whole_gpus(value)
    return value


def _array(value: object) -> ArrayRange:
    if isinstance(value, ArrayRange):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError("write the task indices as text, e.g. 0-999%50 or 1,3,5-9:2%4")
    return parse_array(value)


ArrayField = Annotated[
    ArrayRange,
    PlainValidator(_array),
    PlainSerializer(lambda a: a.expression, return_type=str),
    WithJsonSchema({"type": "string", "examples": ["0-999%50", "1,3,5-9:2%4"]}),
]
"""A job array's task indices and limit (sbatch --array), written as Slurm writes them (config.arrays)."""


GpuCount = Annotated[StrictInt, BeforeValidator(_gpu_count), Field(ge=1, le=MAX_GPUS_PER_REPLICA)]
"""A whole number of GPUs, 1 or more (config/gpus.py's rule for fractional and zero counts)."""


Replicas = Annotated[StrictInt, Field(ge=1, le=MAX_REPLICAS)]
"""Replicas of a gang: 1 to MAX_REPLICAS."""
Priority = Annotated[StrictInt, Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)]
"""A job's priority: it orders the job among its own budget's jobs only."""


class Resources(_Model):
    gpus: GpuCount = 1
    """GPUs per replica."""
    replicas: Replicas = 1
    gpu_types: Choices = ()
    """Allowed GPU types (any when empty)."""
    clusters: Choices = ()
    """Allowed clusters (any when empty)."""
    cpus: Cpus = 0
    """CPUs per replica (Slurm's --cpus-per-task); 0: no request, nothing is counted (decision 60)."""
    memory: Memory = 0
    """Memory per replica in MiB, written as an integer or `512M`, `16G`, `2T` (Slurm's --mem is per node); 0: no
    request."""


class Contract(_Model):
    contract_class: ContractClass = Field(default=ContractClass.GUARANTEED, alias="class")
    slice: Duration | None = None
    """The run slice a guaranteed job asks for (sessions: the session's length). Omitted: the server's policy
    default (`default_slice` clamped to its limits, service.jobs fills it in)."""
    fallback_opportunistic: StrictBool = False
    """Run opportunistically while the budget cannot fund a slice."""


class JobSpec(_Model):
    name: Name | None = None
    budget: Name
    command: Argv
    image: Text | None = Field(default=None, min_length=1, max_length=MAX_IMAGE)
    env: Env = Field(default_factory=dict)
    workdir: Text | None = Field(default=None, min_length=1, max_length=MAX_WORKDIR)
    resources: Resources = Field(default_factory=Resources)
    contract: Contract = Field(default_factory=Contract)
    kind: JobKind = JobKind.BATCH
    priority: Priority = 0
    """Orders this job among its own budget's jobs only."""
    grace: Duration | None = None
    """Seconds between SIGTERM and SIGKILL when the job is preempted. Omitted: the server's policy default
    (`default_grace` capped at `max_grace`, service.jobs fills it in)."""
    max_runtime: Duration | None = None
    requeue: StrictBool = True
    """Go back to the queue after a preemption."""
    hold: StrictBool = False
    """Submit it held (sbatch --hold): a user hold, released with `allot release` (service.holds)."""
    array: ArrayField | None = None
    """Submit a job array (sbatch --array): one task, a job of its own, per index, `%N` of them at most at once;
    every task is held too when `hold` is set."""
    dependency: DependencySpec | None = None
    """Start only once this holds (sbatch --dependency): `afterok:ID[:ID…]`, `afterany`, `afternotok`, `after`,
    `singleton`, parts joined by `,` (all) or `?` (any). The jobs named must exist and be visible to the submitter
    (service.dependencies)."""

    @field_validator("env")
    @classmethod
    def _no_managed(cls, env: dict[str, str]) -> dict[str, str]:
        managed = sorted(k for k in env if is_managed(k))
        if managed:
            raise ValueError(f"{', '.join(managed)} is set by the executor; it cannot be given in env")
        return env

    @model_validator(mode="after")
    def _launchable(self) -> JobSpec:
        too_large = launch_chars(self.command, self.env)
        if too_large:
            raise ValueError(too_large)
        if self.array is not None and self.kind is JobKind.SESSION:
            raise ValueError("a session cannot be a job array: submit an array of batch jobs")
        return self

    @property
    def total_gpus(self) -> int:
        return self.resources.gpus * self.resources.replicas


def with_array(doc: Document[JobSpec], text: str) -> Document[JobSpec]:
    """The spec with its array given apart (sbatch --array on the command line overrides the script's), validated
    again as a whole, so every rule holds for the result; problems keep their lines."""
    data = {**doc.value.model_dump(by_alias=True), "array": text}
    return validate(JobSpec, data, doc.root, "job spec")


def parse_spec_document(text: str) -> Document[JobSpec]:
    """A spec from YAML text, with its node tree for the lines of later checks; Invalid lists every problem."""
    return from_text(JobSpec, text, "job spec")


def parse_spec(text: str) -> JobSpec:
    """A spec from YAML text; raises Invalid with the field, line and reason of every problem."""
    return parse_spec_document(text).value


def spec_from_data(data: Any) -> Document[JobSpec]:
    """A spec from plain data (a JSON body): problems name fields, without lines."""
    return from_data(JobSpec, data, "job spec")
