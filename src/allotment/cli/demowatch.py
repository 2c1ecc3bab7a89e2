"""What `allot demo` shows while its workload runs: events read from the API, and a live view of jobs and budgets.

Owns: the Watcher, which polls the API as an administrator (the queue, the details of jobs that changed, the budget
tree), turns what changed into plain-language events (a start and where, a slice renewed, a preemption with its
reason and notice, a requeue, an end), keeps counts of them, and draws a refreshing Rich view (jobs, busy GPUs,
budgets burning down) when the console is a terminal, or prints the events line by line when it is not.

Must not: submit or change anything (the demo's script does), or reach into the server: everything it knows comes
from the HTTP API through the SDK.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from allotment.cli import render
from allotment.core.jobstate import FINAL, JobState
from allotment.sdk import ApiError, Client
from allotment.sdk import models as m

PREEMPT_WHY = {
    "reservation": "its slice has ended and {by} has a planned start on these GPUs",
    "for-session": "a session needs the headroom it was borrowing",
    "for-guaranteed": "guaranteed work needs the idle GPUs it was using",
    "fair-share": "its slice has ended and {by}'s budget is below its fair share",
    "headroom": "the cluster's session headroom is being refilled",
    "drain": "its node is draining",
    "forced-drain": "an administrator force-drained its node (refunded)",
    "capacity-window": "a capacity window reclaims its pool",
    "idle-session": "the session was idle too long",
    "session-end": "the session reached its length",
    "max-runtime": "it reached its maximum runtime",
}
PREEMPTED = re.compile(r"preempted \((?P<reason>[a-z-]+)\)(?: for (?P<by>j-[0-9a-f]+))?, grace (?P<grace>\d+)s")


@dataclass
class Seen:
    state: str
    slice_end: int | None = None
    checked_slice: bool = False


class Watcher:
    """Polls the API and reports what happens. `names` maps job ids to the demo's names for them."""

    def __init__(self, api: Client, console: Console, *, cluster_gpus: int) -> None:
        self.api = api
        self.console = console
        self.cluster_gpus = cluster_gpus
        self.started = time.monotonic()
        self.seen: dict[str, Seen] = {}
        self.jobs: dict[str, m.JobSummary] = {}
        self.details: dict[str, m.JobDetail] = {}
        self.tree: m.BudgetTree | None = None
        self.counts: Counter[str] = Counter()
        self.events: list[str] = []
        self.stage = ""
        self.live: Live | None = None

    # -- the display -------------------------------------------------------------------------------------------

    def __enter__(self) -> Watcher:
        if self.console.is_terminal:
            self.live = Live(self.view(), console=self.console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self.view())
            self.live.__exit__(None, None, None)
            self.live = None

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:5.1f}s"

    def say(self, text: str, style: str = "") -> None:
        """Narration from the demo's script."""
        self.console.print(Text(f"[{self.elapsed()}] ", style="dim") + Text(text, style=style or "bold cyan"))

    def emit(self, kind: str, text: str, style: str) -> None:
        self.counts[kind] += 1
        self.events.append(text)
        self.console.print(Text(f"[{self.elapsed()}] ", style="dim") + Text(text, style=style))

    def view(self) -> RenderableType:
        busy = sum(j.total_gpus for j in self.jobs.values() if j.state in (JobState.RUNNING, JobState.PREEMPTING))
        header = Text.assemble(
            ("Allotment demo ", "bold"),
            (f"{self.elapsed()}  ", "dim"),
            (f"{busy}/{self.cluster_gpus} GPUs busy  ", "green" if busy else ""),
            (self.stage, "cyan"),
        )
        table = Table(title="Jobs", title_justify="left", expand=False)
        for column in ("job", "user → budget", "GPUs", "contract", "state", "nodes", "slice ends"):
            table.add_column(column)
        now = time.time()
        for job in sorted(self.jobs.values(), key=lambda j: j.submitted_at):
            detail = self.details.get(job.id)
            run = detail.runs[-1] if detail is not None and detail.runs else None
            live_run = run is not None and run.ended_at is None
            table.add_row(
                escape(job.name),
                f"{job.user} → {job.budget}",
                render.gpus(job),
                job.kind if job.kind == "session" else job.contract,
                render.state(job.state),
                ", ".join(n.removeprefix("lab-") for n in run.nodes) if live_run and run else "",
                render.relative(run.slice_end, now) if live_run and run and run.slice_end else "",
            )
        parts: list[RenderableType] = [header, table]
        if self.tree is not None:
            parts.append(render.budget_table(self.tree, title=f"Budgets (credits, period {self.tree.period})"))
        return Group(*parts)

    # -- polling -----------------------------------------------------------------------------------------------

    def name(self, job_id: str | None) -> str:
        if job_id is None:
            return "?"
        job = self.jobs.get(job_id)
        return job.name if job is not None else job_id

    def label(self, job: m.JobSummary) -> str:
        return f"{job.name} ({job.user}/{job.budget}, {render.gpus(job)} GPUs)"

    def poll(self) -> None:
        try:
            jobs = list(self.api.iter_jobs())
            self.tree = self.api.budgets()
        except ApiError as error:
            self.emit("error", f"! the API did not answer: {error}", "red")
            return
        for job in jobs:
            self.jobs[job.id] = job
        for job in sorted(jobs, key=lambda j: (j.updated_at, j.id)):
            self._changes(job)
        if self.live is not None:
            self.live.update(self.view())

    def _detail(self, job_id: str) -> m.JobDetail | None:
        try:
            detail = self.api.job(job_id)
        except ApiError:
            return None
        self.details[job_id] = detail
        return detail

    def _changes(self, job: m.JobSummary) -> None:
        before = self.seen.get(job.id)
        if before is not None and before.state == job.state:
            if job.state == JobState.RUNNING:
                self._slice(job, before)
            return
        detail = self._detail(job.id)
        run = detail.runs[-1] if detail is not None and detail.runs else None
        seen = Seen(job.state, run.slice_end if run is not None and run.ended_at is None else None)
        self.seen[job.id] = seen
        if job.state == JobState.PENDING:
            if before is None:
                kind = "session" if job.kind == "session" else job.contract
                self.emit("queued", f"· {self.label(job)} queued ({kind})", "dim")
            elif before.state == JobState.PREEMPTING:
                self.emit("requeue", f"↺ {job.name} left its GPUs and is back in the queue, to resume later", "yellow")
        elif job.state == JobState.RUNNING and run is not None:
            self._started(job, run)
        elif job.state == JobState.PREEMPTING:
            self._preempting(job)
        elif job.state in FINAL:
            style = render.STATE_STYLE.get(job.state, "red")
            self.emit(job.state, f"■ {job.name} {job.state}: {job.state_reason}", style)

    def _started(self, job: m.JobSummary, run: m.Run) -> None:
        where = ", ".join(run.nodes)
        if job.kind == "session":
            self.emit("session", f"▶ session {self.label(job)} started on {where}", "bold green")
            return
        contract = (
            f"guaranteed slice ends {render.relative(run.slice_end)}"
            if run.slice_end is not None
            else f"{run.run_class}, preemptible at any time"
        )
        self.emit("start", f"▶ started {self.label(job)} on {where}: {contract}", "green")

    def _preempting(self, job: m.JobSummary) -> None:
        found = PREEMPTED.search(job.state_reason)
        if job.state_reason.startswith("cancelling"):
            self.emit("cancel", f"■ {job.name}: cancel requested, {job.state_reason}", "dim")
            return
        if found is None:
            self.emit("preempt", f"⚡ preempting {job.name}: {job.state_reason}", "magenta")
            return
        reason, by, grace = found["reason"], found["by"], found["grace"]
        why = PREEMPT_WHY.get(reason, reason).format(by=self.name(by))
        kind = "preempt-session" if reason == "for-session" else "preempt"
        self.emit(kind, f"⚡ preempting {job.name}: {why}; SIGTERM now, {grace}s to checkpoint", "bold magenta")

    def _slice(self, job: m.JobSummary, seen: Seen) -> None:
        """A running guaranteed job whose slice end has passed: renewed, or lapsed into preemptible work."""
        if seen.slice_end is None or seen.checked_slice or time.time() < seen.slice_end + 1:
            return
        detail = self._detail(job.id)
        run = detail.runs[-1] if detail is not None and detail.runs else None
        if run is None or run.ended_at is not None:
            return
        if run.slice_end is not None and run.slice_end > seen.slice_end:
            seen.slice_end = run.slice_end
            self.emit("renew", f"⟳ {job.name}'s slice ended and was renewed: its budget pays for another, until "
                      f"{render.clock(run.slice_end)}", "cyan")  # fmt: skip
        else:
            seen.checked_slice = True
            self.emit("lapse", f"… {job.name}'s slice ended without renewal: it runs on, preemptible", "yellow")

    def burn(self) -> str:
        """Each leaf budget's remaining credit and what this demo has used of it so far."""
        if self.tree is None:
            return ""
        parts = []
        for b in self.tree.budgets:
            if b.leaf:
                parts.append(f"{b.name} {render.credits(b.remaining_micro, 3)} (−{render.credits(b.used_micro, 3)})")
        return "credits left: " + ", ".join(parts)

    def until(self, done: Callable[[], bool], timeout: float, what: str, every: float = 0.5) -> bool:
        """Poll until `done()` holds; False (with a warning) when `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if done():
                return True
            if time.monotonic() >= deadline:
                self.emit("timeout", f"! gave up waiting for {what} after {timeout:.0f}s", "red")
                return False
            time.sleep(every)

    def state(self, job_id: str) -> str | None:
        job = self.jobs.get(job_id)
        return job.state if job is not None else None
