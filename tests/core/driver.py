"""A small deterministic multi-round driver for the core's tests: it calls decide() with advancing time and applies
the decisions the way the engine will (starts, preemptions with grace, renewals, lapses, reservations), with jobs that
finish after a scripted duration. It is a test double of the engine, not the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from allotment.core.cycle import AllotmentPolicy
from allotment.core.decisions import Decisions
from allotment.core.model import (
    Account,
    Job,
    JobKind,
    Preemption,
    Reservation,
    Run,
    RunClass,
    Snapshot,
)
from allotment.core.policy import Policy
from allotment.core.units import cost


@dataclass
class Event:
    at: int
    kind: str
    job: str
    detail: str = ""


@dataclass
class Driver:
    snapshot: Snapshot
    durations: dict[str, int] = field(default_factory=dict)
    """Seconds of work each job needs; a job without one runs until preempted."""
    policy: Policy = field(default_factory=AllotmentPolicy)
    now: int = 0
    log: list[Event] = field(default_factory=list)
    done: dict[str, int] = field(default_factory=dict)
    spent: dict[str, int] = field(default_factory=dict)
    last: Decisions | None = None
    work_done: dict[str, int] = field(default_factory=dict)
    checkpoints: dict[str, int] = field(default_factory=dict)
    """Seconds between the checkpoints a job saves and reports, from each run's start (as the simulated executor
    reports them); a job without one saves none."""
    silent: set[str] = field(default_factory=set)
    """Jobs that save checkpoints but never report them."""
    lost: dict[str, int] = field(default_factory=dict)
    """Seconds of work each job's killed runs did after their last checkpoint (jobs in `checkpoints` only)."""

    def __post_init__(self) -> None:
        self.jobs: dict[str, Job] = {j.id: j for j in self.snapshot.jobs}
        self.reservations: dict[str, Reservation] = {r.job_id: r for r in self.snapshot.reservations}
        self.accounts: dict[str, Account] = dict(self.snapshot.accounts)

    # -- world changes -----------------------------------------------------------------------------------------
    def submit(self, job: Job, duration: int | None = None) -> None:
        self.jobs[job.id] = replace(job, submitted_at=self.now)
        if duration is not None:
            self.durations[job.id] = duration

    def set_snapshot(self, **changes: object) -> None:
        self.snapshot = replace(self.snapshot, **changes)  # type: ignore[arg-type]

    def current(self) -> Snapshot:
        return replace(
            self.snapshot,
            jobs=tuple(self.jobs.values()),
            reservations=tuple(self.reservations.values()),
            accounts=dict(self.accounts),
        )

    # -- one round ---------------------------------------------------------------------------------------------
    def step(self, to: int | None = None) -> Decisions:
        if to is not None:
            self._advance(to)
        d = self.policy.decide(self.current(), self.now)
        self.last = d
        self._apply(d)
        return d

    def run_until(self, end: int, every: int = 60) -> None:
        """Rounds every `every` seconds and at every event in between (finishes, kills, slice ends), and when the
        last decision asked to decide again (Decisions.wake_at), as the engine does."""
        while self.now < end:
            wake = self.last.wake_at if self.last is not None else None
            asked = [wake] if wake is not None and wake > self.now else []
            nxt = min(self.now + every, end, *self._event_times(), *asked)
            self.step(max(nxt, self.now + 1))

    def _event_times(self) -> list[int]:
        out: list[int] = []
        for j in self.jobs.values():
            r = j.run
            if r is None:
                continue
            if r.preemption is not None:
                # the engine wakes on a victim's exit: a kill due now (no grace) is seen a second later
                out.append(max(r.preemption.kill_at, self.now + 1))
            if r.slice_end is not None and r.slice_end > self.now:
                out.append(r.slice_end)
            dur = self.durations.get(j.id)
            if dur is not None:
                out.append(r.started_at + dur - self.work_done.get(j.id, 0))
        return [t for t in out if t > self.now]

    def _advance(self, to: int) -> None:
        assert to >= self.now
        # charge what ran, then finish jobs and kill preempted ones, in time order
        for j in list(self.jobs.values()):
            r = j.run
            if r is None:
                continue
            end = to
            dur = self.durations.get(j.id)
            finish = None if dur is None else r.started_at + dur - self.work_done.get(j.id, 0)
            kill = r.preemption.kill_at if r.preemption is not None else None
            for t in (finish, kill):
                if t is not None and self.now <= t <= to:
                    end = min(end, t)
            self._charge(j, self.now, end)
            if finish is not None and finish <= to and (kill is None or finish <= kill):
                self.done[j.id] = finish
                self.log.append(Event(finish, "finished", j.id))
                del self.jobs[j.id]
            elif kill is not None and kill <= to:
                self.log.append(Event(kill, "killed", j.id, r.preemption.reason if r.preemption else ""))
                ran = kill - r.started_at
                self.work_done[j.id] = self.work_done.get(j.id, 0) + self._kept(j.id, ran)
                self.lost[j.id] = self.lost.get(j.id, 0) + ran - self._kept(j.id, ran)
                if r.preemption is not None and r.preemption.reason in ("idle-session", "session-end", "max-runtime"):
                    del self.jobs[j.id]
                else:
                    self.jobs[j.id] = replace(j, run=None)
            elif j.id in self.checkpoints and j.id not in self.silent:
                self._report_checkpoints(j, to)
        self.now = to

    def _kept(self, jid: str, ran: int) -> int:
        """The work a run that ran `ran` seconds keeps when it is killed: all of it for a job that saves no
        checkpoints (the driver's jobs resume where they stopped), else up to its last checkpoint."""
        every = self.checkpoints.get(jid)
        return ran if every is None else (ran // every) * every

    def _report_checkpoints(self, job: Job, to: int) -> None:
        """The run's latest checkpoint by `to`, reported as the engine records it: when, and the seconds since the
        one before (or since the run's start)."""
        r, every = job.run, self.checkpoints[job.id]
        assert r is not None
        latest = r.started_at + ((to - r.started_at) // every) * every
        if latest > r.started_at and latest != r.checkpoint_at:
            self.jobs[job.id] = replace(job, run=replace(r, checkpoint_at=latest, checkpoint_every=every))

    def _charge(self, job: Job, a: int, b: int) -> None:
        r = job.run
        if r is None or b <= a:
            return
        node = r.placement[0].node
        gtype = next(n.gpu_type for n in self.snapshot.nodes if n.name == node)
        rate = self.snapshot.rates[gtype]
        pol = self.snapshot.policy
        price = {
            RunClass.GUARANTEED: 1000,
            RunClass.SESSION: pol.session_price,
            RunClass.OPPORTUNISTIC: pol.opportunistic_price,
        }[r.run_class]
        amount = cost(r.gpu_count, rate, price, b - a)
        acc = self.accounts[job.budget]
        self.accounts[job.budget] = Account(acc.balance - amount, acc.usage)
        self.spent[job.budget] = self.spent.get(job.budget, 0) + amount

    def _apply(self, d: Decisions) -> None:
        now = self.now
        for p in d.preempts:
            j = self.jobs[p.job_id]
            assert j.run is not None
            self.jobs[p.job_id] = replace(
                j, run=replace(j.run, preemption=Preemption(now, now + p.grace, p.reason.value, p.preemptor))
            )
            self.log.append(Event(now, "preempt", p.job_id, p.reason.value))
        for rn in d.renews:
            j = self.jobs[rn.job_id]
            assert j.run is not None
            self.jobs[rn.job_id] = replace(j, run=replace(j.run, slice_end=rn.slice_end))
            self.log.append(Event(now, "renew", rn.job_id))
        for lp in d.lapses:
            j = self.jobs[lp.job_id]
            assert j.run is not None
            self.jobs[lp.job_id] = replace(j, run=replace(j.run, run_class=RunClass.OPPORTUNISTIC))
            self.log.append(Event(now, "lapse", lp.job_id, lp.why))
        for s in d.starts:
            j = self.jobs[s.job_id]
            self.jobs[s.job_id] = replace(
                j, run=Run(s.placement, now, s.run_class, s.slice_end, backfill_for=s.backfill_for)
            )
            self.reservations.pop(s.job_id, None)
            self.log.append(Event(now, "start", s.job_id, s.rule))
        self.reservations = {r.job_id: r.carried() for r in d.reserves}

    # -- reading -----------------------------------------------------------------------------------------------
    def running(self) -> set[str]:
        return {j.id for j in self.jobs.values() if j.run is not None}

    def started_at(self, jid: str) -> int | None:
        return next((e.at for e in self.log if e.job == jid and e.kind == "start"), None)

    def events(self, kind: str) -> list[Event]:
        return [e for e in self.log if e.kind == kind]

    def session_jobs(self) -> list[Job]:
        return [j for j in self.jobs.values() if j.kind is JobKind.SESSION]
