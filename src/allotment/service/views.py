"""What the use cases return: plain, typed, read-only records (pydantic models, so the API can serve them as they
are and publish their schema).

Owns: the shapes of jobs (summary, detail with history, runs, slices and charges), log chunks, wait reasons with the
budget's standing, sessions and their attach information, budgets, plans and their changes, nodes and drains, usage
reports, tokens and the caller's identity. Money is integer credit-microunits (1 credit = 1_000_000), times are Unix
seconds.

Must not: hold behaviour or know about HTTP.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class View(BaseModel):
    model_config = ConfigDict(frozen=True)


class JobSummary(View):
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
    """Runs started so far (the next attempt's number)."""
    submitted_at: int
    updated_at: int
    cancel_requested_at: int | None
    hold: str | None = None
    """user or admin while the job is held (scontrol hold; the scheduler does not consider it), else None."""
    requeues: int = 0
    """How many requeues of a run were asked (scontrol requeue; Slurm's Restarts)."""
    array_id: str | None = None
    """The job array this job is a task of (its id is `<array_id>_<array_index>`), else None."""
    array_index: int | None = None
    dependency: str | None = None
    """What it waits for before it may start (sbatch --dependency, canonical text), else None."""


class JobEvent(View):
    at: int
    from_state: str | None
    to_state: str
    reason: str


class RunView(View):
    id: str
    attempt: int
    started_at: int
    ended_at: int | None
    placement: list[dict[str, Any]]
    run_class: str
    """The class the run holds now (service/outlook.py)."""
    slice_end: int | None
    """The run's one slice end: its last granted or renewed slice's (None for opportunistic work)."""
    exit_code: int | None
    end_reason: str | None
    preempt_reason: str | None
    kill_at: int | None
    price: int
    """Per-mille price of the run's class (1000: full price)."""
    began_as: str
    """The class it started as: a guaranteed run whose slice lapsed is opportunistic now, yet began guaranteed."""
    class_since: int
    """When it took its current class: its start, or when its slice lapsed."""
    renewals: int
    """How many times its slice was renewed (the slices list holds each grant and renewal)."""


class SliceView(View):
    run_id: str
    start: int
    end: int
    kind: str


class ChargeView(View):
    at: int
    budget: str
    kind: str
    amount_micro: int
    run_id: str | None
    period: str
    memo: str


class ChargeLine(View):
    """Consecutive charges of one run at one rate and price, coalesced: GPUs × time × rate × price = credits
    (service/charges.py). Any other entry (allocation, refund, adjustment, carry-over) is a line of its own."""

    kind: str
    budget: str
    period: str
    job_id: str | None
    run_id: str | None
    start: int | None
    """The first charged second (charges only)."""
    end: int
    """The last entry's time: for charges, the end of what was charged."""
    gpus: int | None
    seconds: int | None
    gpu_rate_micro: int | None
    """Credit-microunits per GPU-hour at full price (the run's rate over its GPUs)."""
    price: int | None
    """Per mille of the full price (1000: guaranteed work)."""
    amount_micro: int
    """The sum of the line's entries, exactly as posted (signed as in the ledger: charges negative)."""
    entries: int
    first_id: int
    last_id: int
    memo: str | None
    """The raw memo of a one-entry line; coalesced lines leave it out (the entries keep theirs)."""


class JobDetail(JobSummary):
    command: list[str]
    env: dict[str, str]
    image: str | None
    workdir: str | None
    slice_seconds: int
    grace: int
    max_runtime: int | None
    gpu_types: list[str]
    clusters: list[str]
    fallback_opportunistic: bool
    requeue: bool
    request_id: str | None
    history: list[JobEvent]
    runs: list[RunView]
    slices: list[SliceView]
    charges: list[ChargeView]
    """Every ledger entry of the job, with its raw memo."""
    charge_lines: list[ChargeLine]
    """The same entries coalesced into lines, oldest first."""
    charged_micro: int
    """Net credit-microunits this job cost its budget (charges less refunds)."""
    cpus: int = 0
    """CPUs per replica (0: no request)."""
    memory_mib: int = 0
    """MiB of memory per replica (0: no request)."""


class ArrayInfo(View):
    """A job array as its submission created it."""

    id: str
    expression: str
    """Its task indices and limit, normalised (`0-999%50`)."""
    tasks: int
    limit: int | None
    """The most tasks run at once (`%N`), None: no limit."""


class Submitted(View):
    job: JobDetail
    """The job; for an array, its first task (every task is a job: `<array id>_<index>`)."""
    created: bool
    """False when the request id named a job submitted before (a retry)."""
    array: ArrayInfo | None = None
    """The array, when the spec asked for one (`array:`)."""


class ArrayView(View):
    """A job array and where its tasks are: how many in each state, and which (compact index expressions)."""

    id: str
    name: str
    budget: str
    user: str
    expression: str
    tasks: int
    limit: int | None
    counts: dict[str, int]
    """Tasks per state (pending, running, preempting, completed, failed, cancelled, lost), and `held` (pending and
    held, counted in pending too)."""
    indices: dict[str, str]
    """The indices of the tasks in each state of `counts`, as `0-49,60`."""


class ArrayControl(View):
    """What cancel, hold or release did to an array's tasks."""

    array: ArrayView
    action: str
    changed: int
    """Tasks this call changed (a task asked to cancel before, already held or not held is not counted)."""


class JobPage(View):
    items: list[JobSummary]
    next_cursor: str | None
    """Pass as `cursor` to get the next (older) page; None on the last page."""


class LogChunk(View):
    job_id: str
    attempt: int | None
    replica: int | None
    """The replica whose own output this is; None: every replica's (a gang's lines each labelled `N: `)."""
    offset: int
    next_offset: int
    data: str
    complete: bool
    """The attempt has ended and everything it wrote has been returned: stop following."""


class Hint(View):
    kind: str
    detail: str
    start: int | None


class Standing(View):
    budget: str
    allocation_micro: int
    balance_micro: int
    """Credits left in the current period, including what running jobs have accrued but not yet been charged."""
    committed_micro: int
    """What the remaining time of granted slices will cost (already promised)."""
    available_micro: int


class RunOutlook(View):
    """A running job's protection: until when it is safe, whether it may be preempted now, and with what notice."""

    attempt: int
    run_class: str
    started_at: int
    slice_end: int | None
    """The end of its guaranteed slice or of a session's length (past when a slice lapsed); None for opportunistic
    work."""
    preemptible_now: bool
    preemptible_from: int | None
    """When it becomes preemptible (the slice end) if it is not now; None when it never is or already is."""
    notice: int
    """Seconds between SIGTERM and SIGKILL if it is preempted (its grace, capped by the policy's max_grace)."""
    preemptible_by: list[str]
    """What could take its GPUs once it is preemptible, as preemption reasons (docs/policy.md §5)."""
    leaving_at: int | None
    """For a job being preempted or cancelled: when it is killed if it has not left."""
    began_as: str
    """The class the run started as (service/outlook.py)."""
    class_since: int
    """When it took its current class."""


class SessionRoomView(View):
    """A cluster's session room as the engine's last cycle sized it (docs/policy.md §4, `adaptive-room`)."""

    cluster: str
    gpus: int
    """GPUs kept free, or held only by work that leaves within seconds, for sessions."""
    whole: int
    """How many of them are kept on one node (the largest recent session; 0: any spread)."""
    floor: int
    demand: int
    """The window's quantile of concurrent session GPUs (policy.room_quantile, room_window)."""
    shape: int
    """The largest session's GPUs on one node within the window."""
    ceiling: int


class WhyView(View):
    job_id: str
    name: str = ""
    state: str
    blocker: str | None
    """None when the engine has not considered the job yet."""
    message: str
    needed_gpus: int
    free_gpus: int
    estimated_start: int | None
    hints: list[Hint]
    explained_at: int | None
    standing: Standing
    rooms: list[SessionRoomView] = []
    """For a session: the session room of each cluster it may run on."""
    run: RunOutlook | None = None
    """A running job's outlook (None while it waits)."""


class HistoryEntry(View):
    """A finished job as `allot history` shows it (sacct)."""

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
    started_at: int | None
    """The first run's start; None for a job that never ran."""
    ended_at: int
    """When it reached its final state."""
    attempts: int
    elapsed: int
    """Seconds its runs ran, over every attempt."""
    gpu_seconds: int
    """GPUs × seconds over every attempt (gpu_hours = gpu_seconds / 3600)."""
    charged_micro: int
    """Net credit-microunits charged to its budget (charges less refunds)."""
    exit_code: int | None
    """The last run's exit code; None when it never ran or was killed without one."""


class HistoryPage(View):
    since: int
    until: int
    items: list[HistoryEntry]
    next_cursor: str | None


class AttachInfo(View):
    node: str
    gpus: list[int]
    command: list[str]
    """How to reach the session's node and GPUs from a shell."""
    env: dict[str, str]
    hint: str


class SessionView(View):
    job: JobSummary
    ready: bool
    started_at: int | None
    ends_at: int | None
    idle_since: int | None
    attach: list[AttachInfo]


class BudgetNode(View):
    name: str
    parent: str | None
    depth: int
    leaf: bool
    allocation_micro: int
    max_gpus: int | None
    used_micro: int
    """Net spending of the budget's subtree in the current period."""
    remaining_micro: int
    """The subtree's balance in the current period."""


class BudgetTree(View):
    period: str
    budgets: list[BudgetNode]
    """Depth first, parents before their children."""


class MemberView(View):
    user: str
    role: str


class WindowView(View):
    id: str
    budget: str
    cluster: str
    gpu_type: str
    gpus: int
    start: int
    end: int
    booked_gpu_seconds: int
    """GPU-seconds the window has booked so far (its GPUs × the time it has been open, up to now)."""
    used_gpu_seconds: int
    """Of those, what its budget's runs held on the pool (counted up to the window's GPUs at any instant)."""
    unused_gpu_seconds: int
    """Booked but unused: the squatting signal (docs/policy.md §7)."""


class ForecastView(View):
    """When the subtree's balance runs out at its rate over the one rate window (ledger/forecast.py, decision 57)."""

    window: int
    """The rate window in seconds: the trailing 24 hours, the same for every view."""
    spent_micro: int
    """Net spending (charges less refunds) of the subtree in the window."""
    per_hour_micro: int
    outcome: str
    """exhausted (nothing left now) | runs_out (before the period ends, at runs_out_at) | lasts_period."""
    runs_out_at: int | None
    """now when exhausted; before period_end when it runs out; None when it lasts the period."""
    period_end: int
    left_at_end_micro: int
    """What is left at the period end at this rate (0 unless it lasts the period)."""


class BudgetDetail(View):
    period: str
    budget: BudgetNode
    children: list[str]
    forecast: ForecastView
    members: list[MemberView]
    windows: list[WindowView]


class PlanChange(View):
    kind: str
    """budget | member | window"""
    target: str
    field: str
    old: Any
    new: Any


class PlanDiff(View):
    period: str
    changes: list[PlanChange]


class PlanApplied(View):
    period: str
    changes: list[PlanChange]
    audit_id: int
    applied_at: int
    actor: str


class NodeJob(View):
    job_id: str
    user: str
    budget: str
    gpus: int
    run_class: str
    slice_end: int | None
    kill_at: int | None
    began_as: str
    """The class the run started as (service/outlook.py): a guaranteed gang past its slice still began guaranteed."""


class NodeView(View):
    name: str
    cluster: str
    gpu_type: str
    gpus: int
    state: str
    forced: bool
    reason: str | None
    free_gpus: int
    jobs: list[NodeJob]


class DrainView(View):
    node: NodeView
    empty_by: int
    """When the node will be empty at the latest: its jobs' slice ends (or now) plus their grace."""


class UsageRow(View):
    budget: str
    period: str
    gpu_type: str
    gpu_seconds: int
    charged_micro: int
    refunded_micro: int
    net_micro: int


class UsageReport(View):
    periods: list[str]
    rows: list[UsageRow]
    windows: list[WindowView]
    """Capacity windows of the shown budgets overlapping the periods, with booked, used and unused GPU-seconds."""


class TokenView(View):
    id: str
    user: str
    name: str
    created_at: int
    expires_at: int
    revoked_at: int | None
    last_used_at: int | None


class NewToken(View):
    token: TokenView
    secret: str
    """The bearer token. Shown once: only its hash is stored."""


class Me(View):
    user: str
    admin: bool
    operator: bool
    roles: dict[str, str]


class FieldChange(View):
    """One field an update changed: its value before and after."""

    field: str
    before: Any
    after: Any


class JobUpdated(View):
    """An update of a pending job (scontrol update job): the job as it is now and each field that changed (none when
    the update asked for what the job already had)."""

    job: JobSummary
    changes: list[FieldChange]
