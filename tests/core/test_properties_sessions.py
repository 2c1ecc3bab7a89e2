"""Promise 9: a session within the limits starts in the same cycle when a node has room for it, else takes
opportunistic or slice-expired work and starts once their grace has passed; a session idle past the idle timeout is
reclaimed."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from allotment.core.decisions import Blocker, PreemptReason
from allotment.core.model import Job, JobKind, ReservationKind
from tests.core.strategies import (
    CALM,
    DRIVEN,
    PROPERTY,
    Case,
    CheckedDriver,
    Draw,
    cases,
    decide,
    node_map,
)
from tests.core.test_properties_conservation import after, usable_pools

LIMITED = frozenset({Blocker.FUNDS, Blocker.LIMIT, Blocker.SESSION_LIMIT, Blocker.NO_POOL, Blocker.WINDOW})


@PROPERTY
@given(cases())
def test_a_session_that_fits_or_can_take_preemptible_work_is_not_left_waiting(case: Case) -> None:
    """After the cycle, a waiting session (not held back by a limit, funds or a window, and with no reservation) has
    no ready, unclaimed node of a pool it could use where free GPUs, GPUs already leaving and GPUs of opportunistic
    or slice-expired work together reach its size."""
    snap, now = case.snapshot, case.now
    d = decide(case)
    a = after(case, d)
    nodes = node_map(snap)
    reserved = {r.job_id for r in d.reserves}
    preempted = {p.job_id for p in d.preempts}
    renewed = {r.job_id for r in d.renews}  # renewed before sessions are served: inside a slice again
    jobs = {j.id: j for j in snap.jobs}
    takeable: dict[str, int] = dict.fromkeys(a.free, 0)
    for j in snap.jobs:
        run = j.run
        if run is None:
            continue
        leaving = run.preemption is not None or j.id in preempted
        yields = (run.slice_end is None or run.slice_end <= now) and j.id not in renewed
        if leaving or yields:
            for al in run.placement:
                if al.node in takeable:
                    takeable[al.node] += len(al.gpus)
    for job_id, why in d.pending.items():
        job = jobs[job_id]
        if job.kind is not JobKind.SESSION or why.blocker in LIMITED or job_id in reserved:
            continue
        pools, _ = usable_pools(case, job, a)
        for name in a.free:
            n = nodes[name]
            if (n.cluster, n.gpu_type) in pools and name not in a.claimed:
                room = a.free[name] + takeable[name]
                assert room < job.total_gpus, f"session {job_id} waits; {name} has {room} GPUs free or takeable"


@PROPERTY
@given(cases())
def test_sessions_take_only_opportunistic_or_expired_work(case: Case) -> None:
    snap, now = case.snapshot, case.now
    d = decide(case)
    jobs = {j.id: j for j in snap.jobs}
    for p in d.preempts:
        if p.reason is not PreemptReason.FOR_SESSION:
            continue
        run = jobs[p.job_id].run
        assert run is not None and (run.slice_end is None or run.slice_end <= now)
        assert p.preemptor is not None and jobs[p.preemptor].kind is JobKind.SESSION
    for r in d.reserves:
        if jobs[r.job_id].kind is JobKind.SESSION:
            assert r.kind is ReservationKind.PREEMPTION
            assert d.pending[r.job_id].estimated_start == r.planned_start


@PROPERTY
@given(cases())
def test_an_idle_session_past_the_timeout_is_reclaimed(case: Case) -> None:
    snap, now, pol = case.snapshot, case.now, case.snapshot.policy
    d = decide(case)
    reasons = {p.job_id: p.reason for p in d.preempts}
    earlier = {PreemptReason.NODE_DOWN, PreemptReason.FORCED, PreemptReason.MAX_RUNTIME, PreemptReason.SESSION_END}
    for job in snap.jobs:
        run = job.run
        if job.kind is not JobKind.SESSION or run is None or run.preemption is not None:
            continue
        idle = run.idle_since is not None and now - run.idle_since >= pol.session_idle_timeout
        if idle:
            assert reasons.get(job.id) in earlier | {PreemptReason.IDLE_SESSION}, f"idle session {job.id} kept"
        else:
            assert reasons.get(job.id) is not PreemptReason.IDLE_SESSION


@st.composite
def session_arrives(draw: Draw) -> tuple[Case, int, Job]:
    case = draw(cases(replace(CALM, sessions=False, max_pending=16, max_clusters=1, max_nodes=3)))
    warmup = draw(st.integers(0, 2 * 3600))
    leaf = draw(st.sampled_from(case.leaves()))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    session = Job("session", leaf, "someone", gpus, kind=JobKind.SESSION, slice_seconds=3600)
    return case, warmup, session


@DRIVEN
@given(session_arrives())
def test_a_session_starts_now_or_once_its_victims_grace_has_passed(args: tuple[Case, int, Job]) -> None:
    case, warmup, session = args
    drv = CheckedDriver(case.snapshot, case.durations, case.now)
    drv.run_until(case.now + warmup, every=600)
    drv.submit(session)
    d = drv.step(drv.now + 1)
    if any(s.job_id == "session" for s in d.starts):
        return
    why = d.pending["session"]
    if why.blocker is not Blocker.WAITING_FOR_GRACE:
        # nothing it may take, or its budget cannot pay: the first property checks that nothing was takeable
        return
    ready = why.estimated_start
    assert ready is not None
    drv.run_until(ready, every=60)
    if drv.started_at("session") is None:
        drv.step(drv.now + 1)
    began = drv.started_at("session")
    assert began is not None and began <= ready + 1, f"session ready at {ready} started at {began}"
