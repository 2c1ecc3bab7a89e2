"""The simulated executor: scripted outcomes on an explicit clock, in time order, with grace and node failures."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allotment.core.model import Allocation
from allotment.executors.simulated import EXIT_SIGKILL, EXIT_SIGTERM, Outcome, SimulatedExecutor
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec


def spec(job_id: str, *nodes: str, attempt: int = 0, grace: int = 30) -> LaunchSpec:
    placement = tuple(Allocation(n, (0,)) for n in (nodes or ("n1",)))
    return LaunchSpec(job_id, attempt, ("train",), placement, "physics", "ada", "batch", grace, None)


def scripted(outcomes: Mapping[str, Outcome]) -> SimulatedExecutor:
    return SimulatedExecutor(lambda s: outcomes[s.job_id])


def brief(events: list[ExecutorEvent]) -> list[tuple[int, str, str, int | None]]:
    return [(e.at, e.job_id, e.kind.value, e.exit_code) for e in events]


def test_attempts_start_and_exit_at_their_scripted_times_in_time_order() -> None:
    ex = scripted({"a": Outcome(duration=100, exit_code=3), "b": Outcome(duration=20), "c": Outcome(start_delay=5)})
    ex.launch(spec("a"))
    ex.advance_to(10)
    ex.launch(spec("b"))
    ex.launch(spec("c"))
    assert brief(ex.poll()) == [(0, "a", "started", None), (10, "b", "started", None)]
    ex.advance_to(500)
    assert brief(ex.poll()) == [(15, "c", "started", None), (30, "b", "exited", 0), (100, "a", "exited", 3)]
    assert ex.poll() == []
    assert ex.alive() == {"c": 0}


def test_a_job_handling_sigterm_exits_at_once_with_its_code() -> None:
    ex = scripted({"a": Outcome(term_exit_code=0)})
    ex.launch(spec("a"))
    ex.advance_to(50)
    ex.terminate("a", 0, 30)
    ex.advance_to(1000)
    assert brief(ex.poll()) == [(0, "a", "started", None), (50, "a", "exited", 0)]


def test_a_checkpoint_within_grace_finishes_and_one_past_grace_is_killed() -> None:
    ex = scripted({"quick": Outcome(sigterm_exit_after=10), "slow": Outcome(sigterm_exit_after=40)})
    ex.launch(spec("quick"))
    ex.launch(spec("slow"))
    ex.advance_to(100)
    ex.terminate("quick", 0, 30)
    ex.terminate("slow", 0, 30)
    ex.advance_to(1000)
    finals = [e for e in brief(ex.poll()) if e[2] == "exited"]
    assert finals == [(110, "quick", "exited", EXIT_SIGTERM), (130, "slow", "exited", EXIT_SIGKILL)]


def test_a_job_ignoring_sigterm_is_killed_when_the_grace_runs_out_and_repeating_never_restarts_it() -> None:
    ex = scripted({"a": Outcome(sigterm_exit_after=None)})
    ex.launch(spec("a"))
    ex.advance_to(100)
    ex.terminate("a", 0, 60)
    ex.advance_to(150)
    ex.terminate("a", 0, 60)  # would be 210 if it restarted the grace
    assert ex.next_event_time() == 160
    ex.advance_to(1000)
    [final] = [e for e in ex.poll() if e.kind is EventKind.EXITED]
    assert (final.at, final.exit_code) == (160, EXIT_SIGKILL)
    assert "SIGKILL" in final.detail


def test_a_shorter_grace_brings_the_kill_forward() -> None:
    ex = scripted({"a": Outcome(sigterm_exit_after=None)})
    ex.launch(spec("a"))
    ex.terminate("a", 0, 600)
    ex.advance_to(10)
    ex.terminate("a", 0, 0)  # an administrator's forced action
    ex.advance_to(10)
    assert brief(ex.poll())[-1] == (10, "a", "exited", EXIT_SIGKILL)


def test_a_natural_exit_before_the_grace_ends_wins() -> None:
    ex = scripted({"a": Outcome(duration=120, exit_code=0, sigterm_exit_after=None)})
    ex.launch(spec("a"))
    ex.advance_to(100)
    ex.terminate("a", 0, 60)
    ex.advance_to(1000)
    assert brief(ex.poll())[-1] == (120, "a", "exited", 0)


def test_launch_is_idempotent_per_attempt() -> None:
    calls: list[str] = []

    def outcome(s: LaunchSpec) -> Outcome:
        calls.append(s.job_id)
        return Outcome(duration=10)

    ex = SimulatedExecutor(outcome)
    ex.launch(spec("a"))
    ex.launch(spec("a"))
    ex.advance_to(20)
    ex.launch(spec("a"))  # finished: still a no-op
    ex.launch(spec("a", attempt=1))  # a requeue is a new attempt
    assert calls == ["a", "a"]
    assert [(s.job_id, s.attempt) for s in ex.launched] == [("a", 0), ("a", 1)]
    assert [(e.attempt, e.kind) for e in ex.poll()] == [
        (0, EventKind.STARTED),
        (0, EventKind.EXITED),
        (1, EventKind.STARTED),
    ]


def test_fail_node_loses_everything_on_it_at_that_time() -> None:
    ex = scripted({"on": Outcome(), "gang": Outcome(), "off": Outcome(), "late": Outcome(), "after": Outcome()})
    ex.launch(spec("on", "n1"))
    ex.launch(spec("gang", "n2", "n1"))
    ex.launch(spec("off", "n2"))
    ex.fail_node("n1", at=50)
    ex.advance_to(40)
    ex.launch(spec("late", "n1"))  # launched before the failure: lost with the rest
    ex.advance_to(60)
    ex.launch(spec("after", "n1"))  # onto a failed node: lost at once
    events = [e for e in ex.poll() if e.kind is not EventKind.STARTED]
    assert brief(events) == [
        (50, "on", "lost", None),
        (50, "gang", "lost", None),
        (50, "late", "lost", None),
        (60, "after", "lost", None),
    ]
    assert ex.alive() == {"off": 0}
    ex.restore_node("n1")
    ex.launch(spec("after", "n1", attempt=1))
    assert brief(ex.poll()) == [(60, "after", "started", None)]


def test_a_placement_on_an_unknown_node_is_lost() -> None:
    ex = SimulatedExecutor(lambda _s: Outcome(), nodes=["n1"])
    ex.launch(spec("a", "n9"))
    [event] = ex.poll()
    assert (event.kind, event.at) == (EventKind.LOST, 0)
    assert "n9" in event.detail


def test_terminated_before_it_started_it_never_starts() -> None:
    ex = scripted({"a": Outcome(start_delay=30)})
    ex.launch(spec("a"))
    ex.advance_to(10)
    ex.terminate("a", 0, 60)
    ex.advance_to(100)
    assert brief(ex.poll()) == [(10, "a", "exited", EXIT_SIGTERM)]


def test_a_clock_function_drives_it() -> None:
    now = [0]
    ex = SimulatedExecutor(lambda _s: Outcome(duration=5), clock=lambda: now[0])
    ex.launch(spec("a"))
    now[0] = 7
    assert brief(ex.poll()) == [(0, "a", "started", None), (5, "a", "exited", 0)]
    assert ex.now == 7


def test_next_event_time_drives_a_discrete_event_loop() -> None:
    ex = scripted({"a": Outcome(duration=40, start_delay=5), "b": Outcome(duration=10), "c": Outcome()})
    ex.launch(spec("a"))
    ex.launch(spec("b"))
    ex.launch(spec("c"))
    ex.poll()
    times = []
    while (t := ex.next_event_time()) is not None:
        ex.advance_to(t)
        times.append((t, [e.job_id for e in ex.poll()]))
    assert times == [(5, ["a"]), (10, ["b"]), (45, ["a"])]
    assert ex.alive() == {"c": 0}


def test_same_calls_give_the_same_events() -> None:
    def run() -> list[ExecutorEvent]:
        ex = SimulatedExecutor(lambda s: Outcome(duration=10 * (1 + len(s.job_id)), sigterm_exit_after=None))
        for i in range(6):
            ex.launch(spec(f"j{'x' * i}", f"n{i % 2}"))
        ex.advance_to(25)
        ex.terminate("jxxx", 0, 5)
        ex.fail_node("n1", 40)
        ex.advance_to(200)
        return ex.poll()

    assert run() == run()


def test_time_never_goes_back() -> None:
    ex = SimulatedExecutor(lambda _s: Outcome())
    ex.advance_to(10)
    with pytest.raises(ValueError):
        ex.advance_to(9)
    with pytest.raises(ValueError):
        ex.fail_node("n1", 5)


class ScanEverything(SimulatedExecutor):
    """A test double of the simulated executor that collects every live attempt at every call, as it did before it
    learned to collect only the attempt a call changed: the reference for the property below."""

    def _collect(self, t: int, only: object = None) -> None:
        super()._collect(t)

    def advance_to(self, t: int) -> None:
        if t < self.now:
            raise ValueError("back in time")
        self._now = t
        self._collect(t)


CALL = st.one_of(
    st.tuples(st.just("launch"), st.integers(0, 2), st.integers(0, 1), st.integers(0, 3)),
    st.tuples(st.just("terminate"), st.integers(0, 2), st.integers(0, 1), st.sampled_from([0, 0, 5, 30])),
    st.tuples(st.just("advance"), st.sampled_from([0, 0, 1, 5, 20, 90]), st.just(0), st.just(0)),
    st.tuples(st.just("fail"), st.integers(0, 2), st.sampled_from([0, 10, 60]), st.just(0)),
    st.tuples(st.just("poll"), st.just(0), st.just(0), st.just(0)),
)


def _outcome(s: LaunchSpec) -> Outcome:
    n = int(s.job_id[1:]) + 3 * s.attempt
    return Outcome(
        duration=None if n % 4 == 0 else 7 * n + 3,
        sigterm_exit_after=None if n % 3 == 0 else (0 if n % 2 == 0 else n % 5),
        start_delay=n % 3 * 4,
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(CALL, max_size=40))
def test_collecting_only_what_a_call_changed_gives_the_events_of_a_full_scan(
    calls: list[tuple[str, int, int, int]],
) -> None:
    fast, full = SimulatedExecutor(_outcome), ScanEverything(_outcome)
    seen: tuple[list[list[ExecutorEvent]], list[list[ExecutorEvent]]] = ([], [])  # what each poll returned
    for op, a, b, c in calls:
        for ex, out in ((fast, seen[0]), (full, seen[1])):
            if op == "launch":
                ex.launch(spec(f"j{a}", f"n{c % 3}", attempt=b))
            elif op == "terminate":
                ex.terminate(f"j{a}", b, c)
            elif op == "advance":
                ex.advance_to(ex.now + a)
            elif op == "fail":
                ex.fail_node(f"n{a}", ex.now + b)
            else:
                out.append(ex.poll())
    fast.advance_to(fast.now + 1000)
    full.advance_to(full.now + 1000)
    assert [*seen[0], fast.poll()] == [*seen[1], full.poll()]
    assert fast.alive() == full.alive()
