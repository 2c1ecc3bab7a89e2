"""Sessions on the local executor: clients attaching to a running session, and the events that follow.

Owns: the client lease files in an attempt directory (`clients/<pid>.<token>.lease`, each flock'd by its client
for as long as it stays attached), finding the running attempt of a session job, the environment and working
directory a client gets, and turning lease files into ATTACHED / DETACHED events for the executor's poll()
(`attach.json` remembers what was last reported, so a restarted executor never repeats an event).

Must not: start or signal the session's own processes (the supervisor does), decide when an idle session is
reclaimed (the core does, from the events), or import anything but the standard library and allotment.core/ports
(with this package's stdlib-only supervisor module).

Event rules: a session that starts with no client is idle from its start (DETACHED at the start time); the first
client makes it ATTACHED, the last one leaving makes it DETACHED at that client's detach time. A client that came
and went between two polls still counts: ATTACHED at its attach time, then DETACHED at its detach time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from allotment.executors.environment import inherited_environment
from allotment.executors.local import supervisor as sv
from allotment.ports.executor import EventKind, ExecutorEvent

CLIENTS = "clients"
"""Directory of client lease files inside an attempt directory."""
ATTACH_STATE = "attach.json"
"""What poll() last reported for the session: {"attached": bool, "at": seconds}."""
LEASE_SUFFIX = ".lease"


class AttachError(Exception):
    """The job cannot be attached to (unknown, not running, not a session); the message says why."""


@dataclass(frozen=True, slots=True)
class SessionContext:
    job_id: str
    attempt: int
    dir: Path
    node: str
    env: dict[str, str]
    """The session's own variables (CUDA_VISIBLE_DEVICES, ALLOT_*, spec.env) for its first replica."""
    workdir: str
    account: dict[str, Any] | None = None
    """Owner mode: the Unix account the session runs as (spec.json's `account`); a client attaches as it too."""


def running_attempt(state_dir: Path, job_id: str) -> Path:
    """The attempt directory of `job_id`'s running attempt (the newest one that started and has not ended)."""
    base = state_dir / "jobs" / job_id
    if not base.is_dir():
        raise AttachError(f"job {job_id} has never run on this host (no {base})")
    attempts = sorted((int(p.name) for p in base.iterdir() if p.name.isdigit()), reverse=True)
    for attempt in attempts:
        d = base / str(attempt)
        if (d / sv.EXIT).exists():
            continue
        if not (d / sv.JOB).exists():
            raise AttachError(f"job {job_id} attempt {attempt} has not started yet; try again in a moment")
        return d
    raise AttachError(f"job {job_id} is not running (its last attempt ended)")


def session_context(d: Path) -> SessionContext:
    spec = sv.read_json(d / sv.SPEC)
    if spec is None:
        raise AttachError(f"{d} holds no launch specification")
    if spec.get("kind") != "session":
        raise AttachError(f"job {spec['job_id']} is a {spec.get('kind', 'batch')} job, not a session")
    replica = spec["replicas"][0]
    return SessionContext(
        job_id=str(spec["job_id"]),
        attempt=int(spec["attempt"]),
        dir=d,
        node=str(spec["nodes"][0]),
        env={str(k): str(v) for k, v in replica["env"].items()},
        workdir=str(spec["workdir"]),
        account=spec.get("account"),
    )


def client_environment(ctx: SessionContext, base: Mapping[str, str]) -> dict[str, str]:
    """The client's own environment (terminal, HOME, …) without variables the executor owns, then the session's."""
    env = inherited_environment(base)
    env.update(ctx.env)
    env["ALLOT_ATTACHED"] = "1"
    return env


@contextlib.contextmanager
def client_lease(d: Path, user: str) -> Iterator[Path]:
    """Register a client for as long as the block runs: a lease file flock'd by this process. On leaving, the
    detach time is written into it before the lock is dropped, so poll() sees the whole visit even if it looks
    only afterwards. A client killed with SIGKILL drops the lock too (it is then detached at the file's mtime)."""
    clients = d / CLIENTS
    clients.mkdir(mode=0o700, exist_ok=True)
    name = f"{os.getpid()}.{secrets.token_hex(4)}"
    tmp, path = clients / f".{name}.tmp", clients / f"{name}{LEASE_SUFFIX}"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        # locked and filled before it gets its visible name, so poll() never sees a lease that is not yet held
        fcntl.flock(fd, fcntl.LOCK_EX)
        _rewrite(fd, {"pid": os.getpid(), "user": user, "attached_at": time.time()})
        os.rename(tmp, path)
        yield path
    finally:
        with contextlib.suppress(OSError):
            record = json.loads(os.pread(fd, 65536, 0) or b"{}")
            _rewrite(fd, {**record, "detached_at": time.time()})
        os.close(fd)


def _rewrite(fd: int, record: dict[str, Any]) -> None:
    data = json.dumps(record).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


@dataclass(frozen=True, slots=True)
class _Lease:
    path: Path
    live: bool
    attached_at: float
    detached_at: float


def _leases(d: Path) -> list[_Lease]:
    clients = d / CLIENTS
    if not clients.is_dir():
        return []
    found: list[_Lease] = []
    for path in sorted(clients.glob(f"*{LEASE_SUFFIX}")):
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                live = False
            except BlockingIOError:
                live = True
            raw = os.pread(fd, 65536, 0)
            mtime = os.fstat(fd).st_mtime
        finally:
            os.close(fd)
        try:
            record = json.loads(raw) if raw else {}
        except ValueError:
            record = {}  # a client caught between creating and writing its lease
        attached = float(record.get("attached_at", mtime))
        found.append(_Lease(path, live, attached, float(record.get("detached_at", mtime))))
    return found


def clients_attached(d: Path) -> int:
    """How many clients are attached to the attempt in `d` right now."""
    return sum(1 for lease in _leases(d) if lease.live)


def attachment_events(d: Path, job_id: str, attempt: int, started_at: float) -> list[ExecutorEvent]:
    """The ATTACHED / DETACHED events of a running session since the last call (see the module's rules). The new
    state is written to `attach.json` before the events are returned; ended leases are removed."""
    leases = _leases(d)
    live = [lease for lease in leases if lease.live]
    gone = [lease for lease in leases if not lease.live]
    state = sv.read_json(d / ATTACH_STATE)
    attached = bool(state["attached"]) if state is not None else None
    events: list[ExecutorEvent] = []

    def event(kind: EventKind, at: float) -> None:
        events.append(ExecutorEvent(job_id, attempt, kind, int(at), detail=f"{len(live)} client(s) attached"))

    if live:
        if not attached:
            event(EventKind.ATTACHED, min(lease.attached_at for lease in leases))
    elif attached:
        event(EventKind.DETACHED, max((lease.detached_at for lease in gone), default=time.time()))
    elif gone:
        event(EventKind.ATTACHED, min(lease.attached_at for lease in gone))
        event(EventKind.DETACHED, max(lease.detached_at for lease in gone))
    elif attached is None:
        event(EventKind.DETACHED, started_at)  # nobody attached since it started: idle from its start
    now_attached = bool(live)
    if events or attached is None:
        sv.write_json(d / ATTACH_STATE, {"attached": now_attached, "at": time.time()})
    for lease in gone:
        lease.path.unlink(missing_ok=True)
    return events
