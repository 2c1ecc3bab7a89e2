"""The simulated executor: a deterministic stand-in for real processes, driven by an explicit clock value.

Owns: scripted attempts (each launched attempt's outcome comes from a function given at construction), their
STARTED/EXITED events in time order as the clock is advanced, SIGTERM/grace/SIGKILL semantics, and node
failures that turn everything on a node into LOST events.

Must not: read the wall clock, start threads or processes, or draw random numbers (a seeded outcome function
is the caller's business). The same calls in the same order always give the same events.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from allotment.core.model import Seconds
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec

EXIT_SIGTERM = 128 + 15
EXIT_SIGKILL = 128 + 9
"""Exit codes follow the shell convention (128 + signal number), as the local executor records them."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a launched attempt does."""

    duration: Seconds | None = None
    """Seconds from its start until it exits by itself with `exit_code`; None runs until it is terminated."""
    exit_code: int = 0
    sigterm_exit_after: Seconds | None = 0
    """After SIGTERM the job exits this many seconds later with `term_exit_code` (0: at once; a checkpoint
    takes longer). None: it ignores SIGTERM and only SIGKILL, at the end of the grace, ends it. Exiting after
    the grace has run out is too late: SIGKILL comes first."""
    term_exit_code: int = EXIT_SIGTERM
    start_delay: Seconds = 0
    """Seconds between launch and STARTED (pulling an image, a slow node)."""


OutcomeFn = Callable[[LaunchSpec], Outcome]


@dataclass(slots=True)
class _Attempt:
    spec: LaunchSpec
    seq: int
    launched_at: Seconds
    outcome: Outcome
    signalled_at: Seconds | None = None
    kill_at: Seconds | None = None
    lost_at: Seconds | None = None
    lost_detail: str = ""
    started_reported: bool = False
    ended: bool = False

    @property
    def started_at(self) -> Seconds:
        return self.launched_at + self.outcome.start_delay

    def end(self) -> tuple[Seconds, EventKind, int | None, str] | None:
        """When and how the attempt ends given what is known now; None while nothing will end it."""
        o = self.outcome
        ends: list[tuple[Seconds, int, EventKind, int | None, str]] = []
        if self.lost_at is not None:
            ends.append((self.lost_at, 0, EventKind.LOST, None, self.lost_detail))
        if o.duration is not None:
            ends.append((self.started_at + o.duration, 1, EventKind.EXITED, o.exit_code, "exited by itself"))
        if self.signalled_at is not None:
            if self.signalled_at < self.started_at:
                ends.append((self.signalled_at, 2, EventKind.EXITED, EXIT_SIGTERM, "terminated before it started"))
            elif o.sigterm_exit_after is not None:
                at = self.signalled_at + o.sigterm_exit_after
                detail = f"exited with code {o.term_exit_code} after SIGTERM"
                ends.append((at, 2, EventKind.EXITED, o.term_exit_code, detail))
        if self.kill_at is not None:
            ends.append((self.kill_at, 3, EventKind.EXITED, EXIT_SIGKILL, "killed by SIGKILL after the grace period"))
        if not ends:
            return None
        at, _rank, kind, code, detail = min(ends)
        return at, kind, code, detail

    def next_time(self) -> Seconds | None:
        """When this attempt's next event (its STARTED or its end) happens as things stand."""
        end = self.end()
        if self.start_pending(end):
            return self.started_at if end is None else min(self.started_at, end[0])
        return None if end is None else end[0]

    def start_pending(self, end: tuple[Seconds, EventKind, int | None, str] | None) -> bool:
        """True while a STARTED event is to come: not reported yet, and nothing ends the attempt first."""
        if self.started_reported or end is None:
            return not self.started_reported
        return end[0] > self.started_at or (end[0] == self.started_at and end[1] is EventKind.EXITED)


class SimulatedExecutor:
    """An Executor whose processes are scripted outcomes on the caller's clock.

    Drive it with advance_to(t) (or pass `clock`, read at every call) and collect events with poll().
    next_event_time() tells a discrete-event loop when something will next happen.
    """

    def __init__(
        self,
        outcome: OutcomeFn,
        *,
        now: Seconds = 0,
        nodes: Iterable[str] | None = None,
        clock: Callable[[], Seconds] | None = None,
    ) -> None:
        """`outcome`: each launched attempt's script. `nodes`: the nodes it runs (None: any node; a placement
        on an unknown node is LOST at once). `clock`: when given, every call first advances to clock()."""
        self._outcome = outcome
        self._now = now
        self._nodes = frozenset(nodes) if nodes is not None else None
        self._clock = clock
        self._attempts: dict[tuple[str, int], _Attempt] = {}
        self._live: dict[tuple[str, int], _Attempt] = {}
        """The attempts that have not ended, in launch order (every scan reads these: a long simulation launches
        tens of thousands of attempts, nearly all of them long over)."""
        self._due: list[tuple[Seconds, int, tuple[str, int]]] = []
        """A heap of (next event time, launch order, attempt) — pushed whenever an attempt changes, so a scan reads
        only the attempts due, not every live one. An entry is stale when its attempt ended or its next time moved
        (each change pushes the new time): stale entries are dropped when they reach the top."""
        self._down: dict[str, Seconds] = {}
        self._queue: list[ExecutorEvent] = []
        self._launched: list[LaunchSpec] = []

    @property
    def now(self) -> Seconds:
        return self._now

    @property
    def launched(self) -> tuple[LaunchSpec, ...]:
        """Every spec that started an attempt, in launch order (repeated launches are not in it)."""
        return tuple(self._launched)

    # -- the Executor port ---------------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> None:
        self._sync()
        key = (spec.job_id, spec.attempt)
        if key in self._attempts:
            return
        attempt = _Attempt(spec, len(self._attempts), self._now, self._outcome(spec))
        self._attempts[key] = attempt
        self._live[key] = attempt
        self._launched.append(spec)
        nodes = [a.node for a in spec.placement]
        foreign = sorted({n for n in nodes if self._nodes is not None and n not in self._nodes})
        down = sorted({n for n in nodes if n in self._down and self._down[n] <= self._now})
        if not nodes:
            self._lose(attempt, self._now, "the placement names no node")
        elif foreign:
            self._lose(attempt, self._now, f"node(s) {', '.join(foreign)} not managed by this executor")
        elif down:
            self._lose(attempt, self._now, f"node(s) {', '.join(down)} down")
        else:
            for node in nodes:
                if node in self._down:
                    self._lose(attempt, self._down[node], f"node {node} failed")
        self._schedule(key, attempt)
        self._collect(self._now, {key: attempt})  # nothing else changed since the last collection

    def terminate(self, job_id: str, attempt: int, grace: int) -> None:
        """SIGTERM now, SIGKILL at now + grace; repeating it never restarts the grace (a shorter one may bring
        the kill forward)."""
        self._sync()
        a = self._attempts.get((job_id, attempt))
        if a is None or a.ended:
            return
        kill_at = self._now + max(grace, 0)
        if a.signalled_at is None:
            a.signalled_at = self._now
            a.kill_at = kill_at
        elif a.kill_at is None or kill_at < a.kill_at:
            a.kill_at = kill_at
        self._schedule((job_id, attempt), a)
        self._collect(self._now, {(job_id, attempt): a})

    def poll(self) -> list[ExecutorEvent]:
        self._sync()
        events, self._queue = self._queue, []
        return events

    def alive(self) -> Mapping[str, int]:
        self._sync()
        result: dict[str, int] = {}
        for job_id, attempt in self._live:
            result[job_id] = max(attempt, result.get(job_id, attempt))
        return result

    # -- driving it ----------------------------------------------------------------------------------------

    def advance_to(self, t: Seconds) -> None:
        """Move the clock to `t` (never backwards); queue every event up to `t` inclusive, in time order."""
        if t < self._now:
            raise ValueError(f"the simulated executor cannot go back in time ({t} < {self._now})")
        if t == self._now:
            return  # every change at this instant queued its own events already
        self._now = t
        self._collect(t)

    def next_event_time(self) -> Seconds | None:
        """When the next event will happen as things stand; None when nothing is scheduled."""
        due = self._due
        while due:
            at, _, key = due[0]
            a = self._live.get(key)
            if a is not None and a.next_time() == at:
                return at
            heapq.heappop(due)  # stale: the attempt ended, or its next event moved (a fresher entry exists)
        return None

    def follow(self, clock: Callable[[], Seconds]) -> None:
        """From now on advance to clock() at every call (as if `clock` had been given at construction)."""
        self._clock = clock
        self._sync()

    def fail_node(self, node: str, at: Seconds) -> None:
        """The node fails at `at` (now or later): everything on it then ends with a LOST event, and launches
        onto it are LOST until restore_node()."""
        if at < self._now:
            raise ValueError(f"a node failure cannot be scheduled in the past ({at} < {self._now})")
        self._down[node] = at
        for key, a in self._live.items():
            if node in (x.node for x in a.spec.placement):
                self._lose(a, at, f"node {node} failed")
                self._schedule(key, a)
        self._collect(self._now)

    def restore_node(self, node: str) -> None:
        """The node is back (or its scheduled failure is cancelled): new launches onto it run again."""
        self._down.pop(node, None)

    # -- internals -----------------------------------------------------------------------------------------

    def _sync(self) -> None:
        if self._clock is not None:
            self.advance_to(self._clock())

    @staticmethod
    def _lose(a: _Attempt, at: Seconds, detail: str) -> None:
        at = max(at, a.launched_at)
        if a.lost_at is None or at < a.lost_at:
            a.lost_at, a.lost_detail = at, detail

    def _schedule(self, key: tuple[str, int], a: _Attempt) -> None:
        at = a.next_time()
        if at is not None:
            heapq.heappush(self._due, (at, a.seq, key))

    def _due_by(self, t: Seconds) -> dict[tuple[str, int], _Attempt]:
        """The live attempts with an event at or before `t` (their heap entries taken off)."""
        due, found = self._due, {}
        while due and due[0][0] <= t:
            _, _, key = heapq.heappop(due)
            a = self._live.get(key)
            if a is not None:
                found[key] = a
        return found

    def _collect(self, t: Seconds, only: dict[tuple[str, int], _Attempt] | None = None) -> None:
        """Queue the events up to `t` of every live attempt due by then (or of `only`, when nothing else changed),
        ordered by time, then launch order, STARTED first."""
        found: list[tuple[Seconds, int, int, ExecutorEvent]] = []
        over: list[tuple[str, int]] = []
        for (job_id, attempt), a in (self._due_by(t) if only is None else only).items():
            end = a.end()
            if a.start_pending(end) and a.started_at <= t:
                a.started_reported = True
                found.append((a.started_at, a.seq, 0, ExecutorEvent(job_id, attempt, EventKind.STARTED, a.started_at)))
            if end is not None and end[0] <= t:
                at, kind, code, detail = end
                a.ended = True
                over.append((job_id, attempt))
                found.append((at, a.seq, 1, ExecutorEvent(job_id, attempt, kind, at, exit_code=code, detail=detail)))
            if end is None or end[0] > t:
                self._schedule((job_id, attempt), a)  # its next event is later: due again then
        for key in over:
            del self._live[key]
        found.sort(key=lambda f: (f[0], f[1], f[2]))
        self._queue.extend(f[3] for f in found)
