"""The local process executor: runs attempts as processes on this host, each under a detached supervisor.

Owns: the state directory (`<state_dir>/active/` and `<state_dir>/jobs/<job_id>/<attempt>/`, the server's alone), the
CPUs and memory each attempt asked for, recorded in its spec.json with the cores each replica is pinned to
(limits.choose_cores; the supervisor applies them and the memory limit, decision 60), in
owner mode the jobs' own directories (`<jobs_dir>/<account>/<job_id>.<attempt>`, each its account's, 0700) and the
account each attempt runs as (written into spec.json for the supervisor), launching supervisors, terminate()
(SIGTERM to the job's process group now, the SIGKILL deadline stored durably), turning what the supervisors recorded
into events delivered once each, the checkpoint file each job touches when it has saved one (ALLOT_CHECKPOINT_FILE,
in the attempt's own directory) into CHECKPOINTED events, and alive() for reconciliation.

Must not: keep state that matters only in memory (a new instance on the same state directory must carry on where the
last one stopped), run anything through a shell, or decide anything. Imports only the standard library and
allotment.core/ports (and this package's stdlib-only modules, and executors.accounts), so it runs with the
repository on PYTHONPATH alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from allotment.executors.accounts import Account, NoAccount, RunAs, identity_environment, passable_dir, private_dir
from allotment.executors.environment import CHECKPOINT_VARIABLE, inherited_environment, job_command, job_environment
from allotment.executors.local import sessions
from allotment.executors.local import supervisor as sv
from allotment.executors.local.limits import choose_cores, pinned_cores
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec

CHECKPOINT_FILE = "allot-checkpoint"
"""Its name in the attempt's own directory (the state directory's attempt folder, or in owner mode the account's)."""

JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}")
"""Job ids name directories, so they are restricted to a portable, path-safe alphabet."""

DELIVERED_STARTED = "delivered.started"
DELIVERED_FINAL = "delivered.final"
"""Marker files: the event was handed to a poll() caller and is never reported again."""

SUPERVISOR_PATH = Path(sv.__file__).resolve()


class LocalExecutor:
    """An Executor for one host. Every method is safe to call from a fresh instance after a restart."""

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        nodes: Iterable[str] | None = None,
        *,
        base_env: Mapping[str, str] | None = None,
        python: str | None = None,
        startup_timeout: float = 60.0,
        run_as: RunAs | None = None,
        jobs_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """`nodes`: the node names this executor runs (default: this host's name); a placement on any other
        node is refused with a LOST event. `base_env`: the environment jobs inherit (default: this process's,
        read at each launch) before the executor's own variables. `python`: the interpreter for supervisors
        (default: this one). `startup_timeout`: how long a supervisor that a previous instance started may
        take to come up before its attempt is reported LOST. `run_as`: whose account jobs run as (default:
        single-user, the server's own); in owner mode each job runs as its owner's account, with its working
        directory `<jobs_dir>/<account>/<job_id>.<attempt>` (0700, owned by the account; `jobs_dir` must then be
        given, outside the state directory)."""
        self.state_dir = Path(state_dir).resolve()
        self.run_as = run_as if run_as is not None else RunAs()
        self.jobs_dir = Path(jobs_dir).resolve() if jobs_dir is not None else None
        if self.run_as.owner and self.jobs_dir is None:
            raise ValueError("owner mode needs a jobs_dir for the jobs' own directories (outside the state directory)")
        self.nodes = frozenset(nodes) if nodes is not None else frozenset({socket.gethostname()})
        if not self.nodes:
            raise ValueError("a LocalExecutor needs at least one node name")
        self.base_env = base_env
        self.python = python or sys.executable
        self.startup_timeout = startup_timeout
        self._active = self.state_dir / "active"
        self._jobs = self.state_dir / "jobs"
        if not self.state_dir.exists():
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._active.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._jobs.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._children: dict[tuple[str, int], int] = {}
        """Supervisors this instance spawned and has not reaped (used for reaping and the startup window)."""
        self._child_status: dict[tuple[str, int], int] = {}
        self._kinds: dict[Path, str] = {}
        """Each attempt's kind (batch or session) as its spec.json says, read once."""
        self._markers: dict[Path, tuple[Path | None, int]] = {}
        """Each running attempt's checkpoint file (spec.json's, read once) and the last mtime reported from it (a
        restarted executor may report the last one again: the engine ignores a report no later than the last)."""

    # -- paths ---------------------------------------------------------------------------------------------

    def attempt_dir(self, job_id: str, attempt: int) -> Path:
        _check_id(job_id, attempt)
        return self._jobs / job_id / str(attempt)

    def log_path(self, job_id: str, attempt: int, replica: int | None = None) -> Path:
        """The attempt's stdout and stderr as its supervisor copied them (it exists once the supervisor runs):
        every replica, labelled for a gang; with `replica`, that replica's own output (a gang's per-replica file;
        for a single replica, the same file)."""
        d = self.attempt_dir(job_id, attempt)
        if replica is None:
            return d / sv.OUTPUT
        spec = sv.read_json(d / sv.SPEC)
        replicas = len(spec["replicas"]) if spec is not None else 1
        if not 0 <= replica < replicas:
            raise ValueError(f"attempt {attempt} of {job_id} has no replica {replica} (it has {replicas})")
        return d / (sv.replica_output(replica) if replicas > 1 else sv.OUTPUT)

    # -- the Executor port ---------------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> None:
        d = self.attempt_dir(spec.job_id, spec.attempt)
        if (d / sv.SPEC).exists() or (d / sv.EXIT).exists():
            return  # idempotent per (job_id, attempt)
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self._active / _marker(spec.job_id, spec.attempt)).touch()
        spec = replace(spec, command=job_command(spec))
        refusal = self._refusal(spec)
        if refusal is not None:
            write = sv.write_json
            write(d / sv.EXIT, {"ended_at": time.time(), "signal": None, "terminated": False, **refusal})
            return
        try:
            account = self.run_as.account(spec.user)
            own = self._workdir(d, account, spec)
            workdir = spec.workdir if spec.workdir is not None else str(own)
        except (NoAccount, OSError) as exc:
            detail = exc.message if isinstance(exc, NoAccount) else f"no working directory for the job: {exc}"
            record = {"kind": EventKind.EXITED.value, "exit_code": sv.EXIT_NOT_STARTED, "detail": detail}
            sv.write_json(d / sv.EXIT, {"ended_at": time.time(), "signal": None, "terminated": False, **record})
            return
        identity = identity_environment(account) if account is not None else {}
        marker = {CHECKPOINT_VARIABLE: str(own / CHECKPOINT_FILE)}
        cpusets = self._cpusets(spec)
        sv.write_json(
            d / sv.SPEC,
            {
                "job_id": spec.job_id,
                "attempt": spec.attempt,
                "argv": list(spec.command),
                "kind": spec.kind,
                "workdir": workdir,
                "grace": spec.grace,
                "nodes": [a.node for a in spec.placement],
                "replicas": [
                    {
                        "env": {**identity, **job_environment(spec, r), **marker},
                        "cpuset": cpusets[r] if cpusets else None,
                    }
                    for r in range(len(spec.placement))
                ],
                "cpus": spec.cpus,
                "memory_mib": spec.memory,
                "account": None if account is None else account.spec(),
                "checkpoint_file": marker[CHECKPOINT_VARIABLE],
                "created_at": time.time(),
            },
        )
        self._spawn_supervisor(spec.job_id, spec.attempt, d)

    def terminate(self, job_id: str, attempt: int, grace: int) -> None:
        """SIGTERM to the job's process group now; SIGKILL once `grace` seconds have passed. Repeating it
        never restarts the grace period (a shorter grace may bring the deadline forward)."""
        d = self.attempt_dir(job_id, attempt)
        if not (d / sv.SPEC).exists() or (d / sv.EXIT).exists():
            return
        now = time.time()
        kill_at = now + max(grace, 0)
        existing = sv.read_json(d / sv.TERMINATE)
        job = sv.read_json(d / sv.JOB)
        if existing is not None:
            if kill_at < float(existing["kill_at"]):
                sv.write_json(d / sv.TERMINATE, {**existing, "kill_at": kill_at})
                self._enforce_deadline(d, job)
            return
        # The record is written before the signal: a job that handles SIGTERM may exit at once, and its
        # supervisor must already see that it was asked to stop ("after SIGTERM"), not a plain exit.
        sv.write_json(
            d / sv.TERMINATE,
            {"requested_at": now, "grace": grace, "kill_at": kill_at, "signalled": job is not None},
        )
        if job is not None:
            _signal_job(job, signal.SIGTERM)
        self._enforce_deadline(d, job)

    def poll(self) -> list[ExecutorEvent]:
        self._reap()
        events: list[ExecutorEvent] = []
        for job_id, attempt, marker in self._active_attempts():
            events.extend(self._advance(job_id, attempt, marker))
        events.sort(key=lambda e: e.at)  # stable: an attempt's STARTED stays before its EXITED
        return events

    def alive(self) -> Mapping[str, int]:
        self._reap()
        result: dict[str, int] = {}
        for job_id, attempt, _marker_path in self._active_attempts():
            d = self._jobs / job_id / str(attempt)
            if not (d / sv.SPEC).exists() or (d / sv.EXIT).exists():
                continue
            if self._supervisor_alive(job_id, attempt, d):
                result[job_id] = max(attempt, result.get(job_id, attempt))
        return result

    # -- internals -----------------------------------------------------------------------------------------

    def _refusal(self, spec: LaunchSpec) -> dict[str, Any] | None:
        """The final record of an attempt that cannot run here, or None when it can."""
        if not spec.placement:
            return {"kind": EventKind.LOST.value, "exit_code": None, "detail": "the placement names no node"}
        foreign = sorted({a.node for a in spec.placement} - self.nodes)
        if foreign:
            mine = ", ".join(sorted(self.nodes))
            detail = f"node(s) {', '.join(foreign)} not managed by this executor (it runs {mine})"
            return {"kind": EventKind.LOST.value, "exit_code": None, "detail": detail}
        if spec.image is not None:
            detail = f"the local executor cannot run container images ({spec.image})"
            return {"kind": EventKind.EXITED.value, "exit_code": sv.EXIT_NOT_STARTED, "detail": detail}
        if not spec.command:
            return {"kind": EventKind.EXITED.value, "exit_code": sv.EXIT_NOT_STARTED, "detail": "the command is empty"}
        return None

    def _workdir(self, d: Path, account: Account | None, spec: LaunchSpec) -> Path:
        """The job's own directory: in single-user mode the attempt's state directory; in owner mode
        `<jobs_dir>/<account>/<job_id>.<attempt>`, 0700 and owned by the account (the state directory, which holds
        spec.json with the job's secrets and the supervisor's records, stays the server's)."""
        if account is None:
            return d
        assert self.jobs_dir is not None
        home = private_dir(passable_dir(self.jobs_dir) / account.name, account)
        return private_dir(home / _marker(spec.job_id, spec.attempt), account)

    def _spawn_supervisor(self, job_id: str, attempt: int, d: Path) -> None:
        env = inherited_environment(self.base_env if self.base_env is not None else os.environ)
        log = str(d / sv.SUPERVISOR_LOG)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log, flags, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        argv = [self.python, "-I", str(SUPERVISOR_PATH), str(d)]
        pid = os.posix_spawn(self.python, argv, env, file_actions=actions, setsid=True)
        self._children[(job_id, attempt)] = pid

    def _reap(self) -> None:
        for key, pid in list(self._children.items()):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done:
                del self._children[key]
                self._child_status[key] = status

    def _cpusets(self, spec: LaunchSpec) -> list[list[int]]:
        """The cores each replica of a new attempt is pinned to (none when it asks for no CPUs), chosen around the
        cores live attempts are pinned to."""
        if spec.cpus <= 0:
            return []
        in_use: list[int] = []
        for job_id, attempt, _ in self._active_attempts():
            d = self._jobs / job_id / str(attempt)
            if not (d / sv.EXIT).exists():
                in_use.extend(pinned_cores(sv.read_json(d / sv.SPEC)))
        return choose_cores(sorted(os.sched_getaffinity(0)), in_use, len(spec.placement), spec.cpus)

    def _active_attempts(self) -> list[tuple[str, int, Path]]:
        found = []
        for marker in sorted(self._active.iterdir()):
            job_id, _, attempt = marker.name.rpartition(".")
            if JOB_ID.fullmatch(job_id) and attempt.isdigit():
                found.append((job_id, int(attempt), marker))
        return found

    def _supervisor_alive(self, job_id: str, attempt: int, d: Path) -> bool:
        key = (job_id, attempt)
        if (d / sv.SUPERVISOR).exists():
            return _lock_held(d / sv.LOCK)
        if key in self._children:
            return True  # started by this instance and not exited yet: still coming up
        if key in self._child_status:
            return False
        try:
            age = time.time() - (d / sv.SPEC).stat().st_mtime
        except FileNotFoundError:
            return False
        return age < self.startup_timeout

    def _final_record(self, job_id: str, attempt: int, d: Path) -> dict[str, Any] | None:
        """The attempt's exit record; None while it runs. Records LOST when its supervisor vanished."""
        record = sv.read_json(d / sv.EXIT)
        if record is not None or self._supervisor_alive(job_id, attempt, d):
            return record
        record = sv.read_json(d / sv.EXIT)  # it may have finished between the two looks
        if record is not None:
            return record
        job = sv.read_json(d / sv.JOB)
        if job is not None:
            _signal_job(job, signal.SIGKILL)  # a lost attempt must not keep holding its GPUs
        if (d / sv.SUPERVISOR).exists():
            detail = "the supervisor vanished without recording an exit (killed?)"
        else:
            status = self._child_status.get((job_id, attempt))
            detail = "the supervisor never came up" + (
                f" (wait status {status}; see {sv.SUPERVISOR_LOG})" if status is not None else ""
            )
        record = {
            "kind": EventKind.LOST.value,
            "exit_code": None,
            "signal": None,
            "ended_at": time.time(),
            "detail": detail,
            "terminated": False,
        }
        sv.write_json(d / sv.EXIT, record)
        return record

    def _advance(self, job_id: str, attempt: int, marker: Path) -> list[ExecutorEvent]:
        d = self._jobs / job_id / str(attempt)
        if not (d / sv.SPEC).exists() and not (d / sv.EXIT).exists():
            with contextlib.suppress(FileNotFoundError):
                if time.time() - marker.stat().st_mtime > self.startup_timeout:
                    marker.unlink()  # a launch interrupted before it wrote anything: nothing ran
            return []
        events: list[ExecutorEvent] = []
        job = sv.read_json(d / sv.JOB)
        if job is not None and _claim(d / DELIVERED_STARTED):
            at = int(job["started_at"])
            events.append(ExecutorEvent(job_id, attempt, EventKind.STARTED, at, detail=f"pgid {job['pgid']}"))
        record = self._final_record(job_id, attempt, d)
        if record is None:
            self._enforce_deadline(d, job)
            if job is not None and self._is_session(d):
                events.extend(sessions.attachment_events(d, job_id, attempt, float(job["started_at"])))
            if job is not None:
                events.extend(self._checkpoint_events(d, job_id, attempt))
            return events
        if _claim(d / DELIVERED_FINAL):
            kind = EventKind.LOST if record["kind"] == EventKind.LOST.value else EventKind.EXITED
            code = record.get("exit_code")
            events.append(
                ExecutorEvent(
                    job_id,
                    attempt,
                    kind,
                    int(record["ended_at"]),
                    exit_code=None if code is None else int(code),
                    detail=str(record.get("detail", "")),
                )
            )
        marker.unlink(missing_ok=True)
        self._child_status.pop((job_id, attempt), None)
        self._kinds.pop(d, None)
        self._markers.pop(d, None)
        return events

    def _checkpoint_events(self, d: Path, job_id: str, attempt: int) -> list[ExecutorEvent]:
        """A CHECKPOINTED event when the job touched its checkpoint file ($ALLOT_CHECKPOINT_FILE) since the last
        poll, at the file's modification time."""
        path, last = self._markers.get(d, (None, -1))
        if last < 0:
            spec = sv.read_json(d / sv.SPEC)
            found = spec.get("checkpoint_file") if spec is not None else None
            path, last = (Path(found) if found else None), 0
            self._markers[d] = (path, last)
        if path is None:
            return []
        try:
            at = int(path.stat().st_mtime)
        except OSError:
            return []
        if at <= last:
            return []
        self._markers[d] = (path, at)
        return [ExecutorEvent(job_id, attempt, EventKind.CHECKPOINTED, at)]

    def _is_session(self, d: Path) -> bool:
        kind = self._kinds.get(d)
        if kind is None:
            spec = sv.read_json(d / sv.SPEC)
            kind = self._kinds[d] = str(spec.get("kind", "batch")) if spec is not None else "batch"
        return kind == "session"

    def _enforce_deadline(self, d: Path, job: dict[str, Any] | None) -> None:
        """Backstop for the supervisor: SIGKILL the group once a stored kill deadline has passed."""
        if job is None:
            return
        term = sv.read_json(d / sv.TERMINATE)
        if term is not None and time.time() >= float(term["kill_at"]):
            _signal_job(job, signal.SIGKILL)


def _check_id(job_id: str, attempt: int) -> None:
    if not JOB_ID.fullmatch(job_id):
        raise ValueError(f"job id {job_id!r} is not path-safe ([A-Za-z0-9._@+-], starting alphanumeric)")
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, not {attempt}")


def _marker(job_id: str, attempt: int) -> str:
    return f"{job_id}.{attempt}"


def _claim(path: Path) -> bool:
    """Create the marker file; True only for the caller that created it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.fsync(fd)
    os.close(fd)
    return True


def _lock_held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock if it got one
    return False


def _signal_job(job: Mapping[str, Any], sig: int) -> None:
    """Signal the job's process group, unless its leader's pid now belongs to an unrelated process."""
    pgid = int(job["pgid"])
    expected = job.get("leader_start_id")
    current = sv.process_start_id(pgid)
    if expected is not None and current is not None and current != expected:
        return
    sv.signal_group(pgid, sig)
