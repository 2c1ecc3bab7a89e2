"""What the dashboard's read models return: plain, typed, read-only records for the web dashboard (and any client)
— the organisation overview, budgets with their pace against the period, a budget's burn-down series, a budget's
charges, the pending queue with each job's reason, the fleet map and the simulation reports found on disk.

Owns: the shapes only. Money is integer credit-microunits (1 credit = 1_000_000), times are Unix seconds.

Must not: hold behaviour or know about HTTP.
"""

from __future__ import annotations

from allotment.service.views import BudgetNode, ForecastView, Hint, JobSummary, SessionRoomView, View


class PeriodView(View):
    id: str
    start: int
    end: int


class ClusterUse(View):
    name: str
    nodes: int
    gpus: int
    used_gpus: int
    """GPUs held by running work now."""
    unavailable_gpus: int
    """GPUs of nodes that take no new work (cordoned, draining or down)."""


class BudgetPace(BudgetNode):
    forecast: ForecastView
    """When the remaining credit runs out at the rate window's rate, or that it lasts the period."""
    used_fraction: float
    """used / (used + remaining): how much of this period's funds is gone."""
    elapsed_fraction: float
    """How much of the period has passed."""
    pace: float | None
    """used_fraction / elapsed_fraction: above 1 the budget spends faster than the period passes."""


class BudgetPaces(View):
    now: int
    period: PeriodView
    window: int
    """The forecast's rate window in seconds (the trailing 24 hours; decision 57)."""
    budgets: list[BudgetPace]
    """Depth first, parents before their children."""


class Overview(View):
    now: int
    period: PeriodView
    clusters: list[ClusterUse]
    gpus: int
    used_gpus: int
    unavailable_gpus: int
    jobs_by_state: dict[str, int]
    pending_gpus: int
    """GPUs the pending jobs ask for, all together."""
    fastest: list[BudgetPace]
    """Leaf budgets spending fastest over the rate window, fastest first."""


class BurnPoint(View):
    at: int
    remaining_micro: int


class BurnDown(View):
    budget: str
    now: int
    period: PeriodView
    funds_micro: int
    """What the subtree has had to spend this period (used + remaining)."""
    remaining_micro: int
    bucket: int
    points: list[BurnPoint]
    """Remaining credit at the period start, at every bucket boundary since, and now."""
    forecast: ForecastView


class ChargeRow(View):
    id: int
    at: int
    budget: str
    kind: str
    amount_micro: int
    job_id: str | None
    run_id: str | None
    memo: str


class ChargePage(View):
    items: list[ChargeRow]
    next_cursor: str | None


class QueuedJob(JobSummary):
    blocker: str | None
    """None until the engine has considered the job."""
    message: str
    needed_gpus: int
    free_gpus: int
    estimated_start: int | None
    hints: list[Hint]
    explained_at: int | None


class QueuePage(View):
    total: int
    """Pending jobs matching the filters, over all pages."""
    items: list[QueuedJob]
    next_cursor: str | None


class FleetNode(View):
    name: str
    gpu_type: str
    gpus: int
    used_gpus: int
    state: str
    forced: bool
    reason: str | None
    jobs: int
    empty_by: int | None
    """Draining nodes: when they will be empty at the latest."""


class FleetCluster(View):
    name: str
    gpus: int
    used_gpus: int
    nodes: list[FleetNode]
    room: SessionRoomView | None = None
    """The cluster's session room as the engine's last cycle sized it (None before the first cycle)."""


class FleetMap(View):
    now: int
    clusters: list[FleetCluster]


class SimReport(View):
    name: str
    """The report's folder, relative to the reports directory."""
    files: list[str]
    """report.html and/or report.md."""
    modified: int
