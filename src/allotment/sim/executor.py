"""The simulator's executor: the simulated executor driven by each job's true behaviour.

Owns: turning a launched attempt into its scripted outcome (the work left since the last checkpoint, a seeded
crash with the job's failure probability), keeping each job's checkpointed progress across preemptions, the work
and GPU-seconds each attempt lost, sessions' attach/detach events during their idle periods, and the CHECKPOINTED
event of each checkpoint a job that reports them saves. It wraps `allotment.executors.simulated.SimulatedExecutor`
(which owns SIGTERM/grace/SIGKILL and node failures) and is an adapter of the Executor port like any other.

Must not: decide, touch the store, or draw from an unseeded random source. The same seed and calls give the same
events.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from allotment.core.model import Seconds
from allotment.executors.simulated import Outcome, SimulatedExecutor
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec
from allotment.sim.workload import SimJob


@dataclass(slots=True)
class AttemptRecord:
    """What one attempt did, from the executor's side."""

    job_id: str
    attempt: int
    started: Seconds | None = None
    ended: Seconds | None = None
    exit_code: int | None = None
    lost_work: Seconds = 0
    """Seconds of work done in this attempt that no checkpoint kept."""
    gpus: int = 0


def attempt_seed(seed: int, job_id: str, attempt: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{job_id}:{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class SimExecutor:
    """An Executor for the simulator. Drive it with `follow(clock)` like the simulated executor."""

    def __init__(
        self,
        jobs: Mapping[str, SimJob],
        seed: int,
        now: Seconds,
        clock: Callable[[], Seconds],
        report_checkpoints: bool = True,
    ) -> None:
        """`report_checkpoints`: jobs that checkpoint tell the scheduler when they do (rule `least-lost-work`)."""
        self.jobs = jobs
        self.report_checkpoints = report_checkpoints
        self._checkpoints: list[tuple[Seconds, int, str, int]] = []
        """(next checkpoint, sequence, job, attempt) of running attempts that report them, earliest first."""
        self.seed = seed
        self.inner = SimulatedExecutor(self._outcome, now=now, clock=clock)
        self.progress: dict[str, Seconds] = {}
        self.attempts: dict[tuple[str, int], AttemptRecord] = {}
        self._sessions: list[tuple[Seconds, int, str, int, EventKind]] = []
        self._seq = 0
        self.poll_count = 0
        """Events reported so far (for events per second)."""

    # -- outcomes ----------------------------------------------------------------------------------------------
    def _outcome(self, spec: LaunchSpec) -> Outcome:
        job = self.jobs[spec.job_id]
        left = max(job.work - self.progress.get(job.id, 0), 1)
        self.attempts[(spec.job_id, spec.attempt)] = AttemptRecord(spec.job_id, spec.attempt, gpus=job.total_gpus)
        if job.fail_probability > 0:
            rng = random.Random(attempt_seed(self.seed, spec.job_id, spec.attempt))
            if rng.random() < job.fail_probability:
                return Outcome(duration=max(1, int(left * rng.random())), exit_code=1)
        return Outcome(duration=left, sigterm_exit_after=0)

    # -- the Executor port -------------------------------------------------------------------------------------
    def launch(self, spec: LaunchSpec) -> None:
        self.inner.launch(spec)

    def terminate(self, job_id: str, attempt: int, grace: int) -> None:
        self.inner.terminate(job_id, attempt, grace)

    def alive(self) -> Mapping[str, int]:
        return self.inner.alive()

    def poll(self) -> list[ExecutorEvent]:
        events = self.inner.poll()
        for ev in events:
            self._hear(ev)
        now = self.inner.now
        while self._sessions and self._sessions[0][0] <= now:
            at, _seq, job_id, attempt, kind = heapq.heappop(self._sessions)
            record = self.attempts.get((job_id, attempt))
            if record is not None and (record.ended is None or record.ended > at):
                events.append(ExecutorEvent(job_id, attempt, kind, at))
        self._saved(now, events)
        events.sort(key=lambda e: e.at)
        self.poll_count += len(events)
        return events

    def next_event_time(self) -> Seconds | None:
        times = [t for t in (self.inner.next_event_time(), self._sessions[0][0] if self._sessions else None) if t]
        return min(times) if times else None

    def fail_node(self, node: str, at: Seconds) -> None:
        self.inner.fail_node(node, at)

    def restore_node(self, node: str) -> None:
        self.inner.restore_node(node)

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def _saved(self, now: Seconds, events: list[ExecutorEvent]) -> None:
        """Append the checkpoints running attempts saved since the last poll: every `checkpoint` seconds from the
        start, as the outcome counts kept work (not a reason to decide: the store hears them at the next cycle, as a
        server hears a job's reports between cycles)."""
        heap = self._checkpoints
        while heap and heap[0][0] <= now:
            at, seq, job_id, attempt = heapq.heappop(heap)
            record = self.attempts[(job_id, attempt)]
            every = self.jobs[job_id].checkpoint
            if record.ended is not None or not every:
                continue
            events.append(ExecutorEvent(job_id, attempt, EventKind.CHECKPOINTED, at))
            heapq.heappush(heap, (at + every, seq, job_id, attempt))

    def _hear(self, ev: ExecutorEvent) -> None:
        record = self.attempts.get((ev.job_id, ev.attempt))
        if record is None:
            return
        job = self.jobs[ev.job_id]
        if ev.kind is EventKind.STARTED:
            record.started = ev.at
            if self.report_checkpoints and job.checkpoint:
                self._seq += 1
                heapq.heappush(self._checkpoints, (ev.at + job.checkpoint, self._seq, job.id, ev.attempt))
            for start, end in job.idle:
                for offset, kind in ((start, EventKind.DETACHED), (end, EventKind.ATTACHED)):
                    self._seq += 1
                    heapq.heappush(self._sessions, (ev.at + offset, self._seq, job.id, ev.attempt, kind))
        elif ev.kind in (EventKind.EXITED, EventKind.LOST):
            record.ended, record.exit_code = ev.at, ev.exit_code
            ran = max(ev.at - record.started, 0) if record.started is not None else 0
            done = self.progress.get(job.id, 0)
            if ev.kind is EventKind.EXITED and ev.exit_code == 0:
                self.progress[job.id] = job.work
                return
            kept = (ran // job.checkpoint) * job.checkpoint if job.checkpoint else 0
            self.progress[job.id] = min(done + kept, job.work)
            record.lost_work = ran - kept
