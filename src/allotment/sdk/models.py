"""The API's response bodies as the SDK returns them: typed, read-only pydantic models mirroring docs/api.md.

Owns: the shapes a client reads (jobs, history, runs, slices, charges, logs, wait reasons, sessions, budgets, plans,
nodes, drains, usage, tokens, the caller). Money is integer credit-microunits (1 credit = 1,000,000), times are Unix
seconds. Unknown fields are ignored, so an older SDK keeps working against a newer server.

Must not: import the server's packages (api, service, store, engine): the SDK is installable and importable on its
own; tests/sdk checks that these models keep the server's field names.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MICRO = 1_000_000
"""Credit-microunits per credit."""


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class JobSummary(Model):
    id: str
    name: str
    budget: str
    user: str
    kind: str
    contract: str
    gpus: int
    replicas: int
    priority: int
    state: str
    state_reason: str
    attempt: int
    submitted_at: int
    updated_at: int
    cancel_requested_at: int | None = None
    hold: str | None = None
    """user or admin while the job is held (the scheduler does not consider it), else None."""
    requeues: int = 0
    """How many requeues of a run were asked (allot requeue; Slurm's Restarts)."""
    array_id: str | None = None
    """The job array this job is a task of (its id is `<array_id>_<array_index>`), else None."""
    array_index: int | None = None
    dependency: str | None = None
    """What it waits for before it may start (sbatch --dependency text, e.g. afterok:j-1:j-2), else None."""

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.replicas


class JobEvent(Model):
    at: int
    from_state: str | None = None
    to_state: str
    reason: str


class Run(Model):
    id: str
    attempt: int
    started_at: int
    ended_at: int | None = None
    placement: list[dict[str, Any]] = Field(default_factory=list)
    run_class: str
    slice_end: int | None = None
    exit_code: int | None = None
    end_reason: str | None = None
    preempt_reason: str | None = None
    kill_at: int | None = None
    price: int = 1000
    began_as: str = ""
    """The class the run started as (a guaranteed run past an unrenewed slice is opportunistic now)."""
    class_since: int = 0
    renewals: int = 0

    @property
    def nodes(self) -> list[str]:
        return [str(p.get("node", "?")) for p in self.placement]


class Slice(Model):
    run_id: str
    start: int
    end: int
    kind: str


class Charge(Model):
    at: int
    budget: str
    kind: str
    amount_micro: int
    run_id: str | None = None
    period: str
    memo: str = ""


class ChargeLine(Model):
    """Consecutive charges of one run coalesced: GPUs × time × rate × price = credits; other entries one a line."""

    kind: str
    budget: str
    period: str
    job_id: str | None = None
    run_id: str | None = None
    start: int | None = None
    end: int
    gpus: int | None = None
    seconds: int | None = None
    gpu_rate_micro: int | None = None
    price: int | None = None
    amount_micro: int
    entries: int = 1
    first_id: int
    last_id: int
    memo: str | None = None


class ChargeLinePage(Model):
    items: list[ChargeLine]
    next_cursor: str | None = None


class JobDetail(JobSummary):
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    image: str | None = None
    workdir: str | None = None
    slice_seconds: int
    grace: int
    max_runtime: int | None = None
    gpu_types: list[str] = Field(default_factory=list)
    clusters: list[str] = Field(default_factory=list)
    fallback_opportunistic: bool = False
    requeue: bool = True
    request_id: str | None = None
    history: list[JobEvent] = Field(default_factory=list)
    runs: list[Run] = Field(default_factory=list)
    slices: list[Slice] = Field(default_factory=list)
    charges: list[Charge] = Field(default_factory=list)
    charge_lines: list[ChargeLine] = Field(default_factory=list)
    charged_micro: int = 0
    cpus: int = 0
    """CPUs per replica (0: no request)."""
    memory_mib: int = 0
    """MiB of memory per replica (0: no request)."""


class ArrayInfo(Model):
    """A job array as its submission created it."""

    id: str
    expression: str
    tasks: int
    limit: int | None = None


class Submitted(Model):
    job: JobDetail
    """The job; for an array, its first task."""
    created: bool
    array: ArrayInfo | None = None


class ArrayView(Model):
    """A job array: its tasks per state (`counts`, and `held`) and their indices (`0-49,60`)."""

    id: str
    name: str
    budget: str
    user: str
    expression: str
    tasks: int
    limit: int | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    indices: dict[str, str] = Field(default_factory=dict)


class ArrayControl(Model):
    """What cancel, hold or release did to an array's tasks."""

    array: ArrayView
    action: str
    changed: int


class JobPage(Model):
    items: list[JobSummary]
    next_cursor: str | None = None


class LogChunk(Model):
    job_id: str
    attempt: int | None = None
    replica: int | None = None
    offset: int
    next_offset: int
    data: str
    complete: bool


class Hint(Model):
    kind: str
    detail: str
    start: int | None = None


class Standing(Model):
    budget: str
    allocation_micro: int
    balance_micro: int
    committed_micro: int
    available_micro: int


class RunOutlook(Model):
    attempt: int
    run_class: str
    started_at: int
    slice_end: int | None = None
    preemptible_now: bool
    preemptible_from: int | None = None
    notice: int
    preemptible_by: list[str] = Field(default_factory=list)
    leaving_at: int | None = None
    began_as: str = ""
    class_since: int = 0


class SessionRoom(Model):
    """A cluster's session room: `gpus` kept free or fast-leaving for sessions, `whole` of them on one node, sized as
    max(floor, demand, shape) capped by the ceiling."""

    cluster: str
    gpus: int
    whole: int = 0
    floor: int
    demand: int = 0
    shape: int = 0
    ceiling: int


class FleetCluster(Model):
    name: str
    gpus: int
    used_gpus: int
    room: SessionRoom | None = None


class FleetMap(Model):
    """The dashboard's fleet map (GET /dashboard/fleet), clusters only: the nodes are left out here."""

    now: int
    clusters: list[FleetCluster] = Field(default_factory=list)


class Why(Model):
    job_id: str
    name: str = ""
    state: str
    blocker: str | None = None
    message: str
    needed_gpus: int
    free_gpus: int
    estimated_start: int | None = None
    hints: list[Hint] = Field(default_factory=list)
    explained_at: int | None = None
    standing: Standing
    rooms: list[SessionRoom] = Field(default_factory=list)
    run: RunOutlook | None = None


class QueuedJob(JobSummary):
    """A pending job with the reason the engine's last cycle wrote (blocker None until it has considered the job)."""

    blocker: str | None = None
    message: str = ""
    needed_gpus: int = 0
    free_gpus: int = 0
    estimated_start: int | None = None
    hints: list[Hint] = Field(default_factory=list)
    explained_at: int | None = None


class QueuePage(Model):
    total: int
    """Pending jobs matching the filters, over all pages."""
    items: list[QueuedJob]
    next_cursor: str | None = None


class HistoryEntry(Model):
    id: str
    name: str
    user: str
    budget: str
    kind: str
    contract: str
    gpus: int
    replicas: int
    state: str
    state_reason: str
    submitted_at: int
    started_at: int | None = None
    ended_at: int
    attempts: int
    elapsed: int
    gpu_seconds: int
    charged_micro: int
    exit_code: int | None = None

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600


class HistoryPage(Model):
    since: int
    until: int
    items: list[HistoryEntry]
    next_cursor: str | None = None


class AttachInfo(Model):
    node: str
    gpus: list[int]
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    hint: str = ""


class Session(Model):
    job: JobSummary
    ready: bool
    started_at: int | None = None
    ends_at: int | None = None
    idle_since: int | None = None
    attach: list[AttachInfo] = Field(default_factory=list)


class BudgetNode(Model):
    name: str
    parent: str | None = None
    depth: int
    leaf: bool
    allocation_micro: int
    max_gpus: int | None = None
    used_micro: int
    remaining_micro: int


class BudgetTree(Model):
    period: str
    budgets: list[BudgetNode]

    def get(self, name: str) -> BudgetNode | None:
        return next((b for b in self.budgets if b.name == name), None)


class Member(Model):
    user: str
    role: str


class Window(Model):
    id: str
    budget: str
    cluster: str
    gpu_type: str
    gpus: int
    start: int
    end: int
    booked_gpu_seconds: int = 0
    used_gpu_seconds: int = 0
    unused_gpu_seconds: int = 0
    """Booked but unused so far: the squatting signal."""


class Forecast(Model):
    """When a budget's balance runs out at its rate over the one rate window (the trailing 24 hours)."""

    window: int
    spent_micro: int
    per_hour_micro: int
    outcome: str
    """exhausted | runs_out (at runs_out_at, before period_end) | lasts_period."""
    runs_out_at: int | None = None
    period_end: int
    left_at_end_micro: int = 0


class BudgetDetail(Model):
    period: str
    budget: BudgetNode
    children: list[str] = Field(default_factory=list)
    forecast: Forecast
    members: list[Member] = Field(default_factory=list)
    windows: list[Window] = Field(default_factory=list)


class PlanChange(Model):
    kind: str
    target: str
    field: str
    old: Any = None
    new: Any = None


class PlanDiff(Model):
    period: str
    changes: list[PlanChange]


class PlanApplied(Model):
    period: str
    changes: list[PlanChange]
    audit_id: int
    applied_at: int
    actor: str


class NodeJob(Model):
    job_id: str
    user: str
    budget: str
    gpus: int
    run_class: str
    slice_end: int | None = None
    kill_at: int | None = None
    began_as: str = ""


class Node(Model):
    name: str
    cluster: str
    gpu_type: str
    gpus: int
    state: str
    forced: bool = False
    reason: str | None = None
    free_gpus: int
    jobs: list[NodeJob] = Field(default_factory=list)


class Drain(Model):
    node: Node
    empty_by: int


class UsageRow(Model):
    budget: str
    period: str
    gpu_type: str
    gpu_seconds: int
    charged_micro: int
    refunded_micro: int
    net_micro: int


class UsageReport(Model):
    periods: list[str]
    rows: list[UsageRow]
    windows: list[Window] = Field(default_factory=list)


class Token(Model):
    id: str
    user: str
    name: str = ""
    created_at: int
    expires_at: int
    revoked_at: int | None = None
    last_used_at: int | None = None


class NewToken(Model):
    token: Token
    secret: str


class Me(Model):
    user: str
    admin: bool
    operator: bool
    roles: dict[str, str] = Field(default_factory=dict)


class Health(Model):
    status: str
    time: int
    database: bool
    run_as: str = "single-user"
    """`owner` (each job runs as its owner's Unix account) or `single-user` (as the server's own)."""


class Problem(Model):
    field: str
    reason: str
    line: int | None = None


class FieldChange(Model):
    """One field an update changed (PATCH /jobs/{id}): its value before and after."""

    field: str
    before: Any = None
    after: Any = None


class JobUpdated(Model):
    """An update of a pending job: the job as it is now and each field that changed (none: it already had them)."""

    job: JobSummary
    changes: list[FieldChange] = Field(default_factory=list)


class CancelReport(Model):
    """What a cancellation by filter asked (POST /jobs/cancel)."""

    jobs: list[JobSummary]
    matched: int
    requested: int
    """Cancellation requests this call recorded (0 in a dry run)."""
    dry_run: bool = False
