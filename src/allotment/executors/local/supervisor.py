"""The supervisor of one attempt of the local executor: a small process that outlives the server.

Owns: starting the attempt's argument vector (never through a shell) in its own process group, as the account
spec.json names when it names one (owner mode: uid, gid and every group of the job's owner; the executor puts
its HOME, USER, LOGNAME and SHELL into each replica's env), applying the CPUs and memory spec.json records (each
replica pinned to its cores with sched_setaffinity; RLIMIT_DATA set to the memory asked per node; decision 60),
recording the job's pids, forwarding termination
(SIGTERM now, SIGKILL at the recorded deadline), copying each replica's output from a pipe into log files that it
alone opens and writes (the job never sees a path to them), and writing the exit record atomically into the
attempt's state directory. Also owns the names of the files in that directory and the helpers that read and write
them, which the executor imports from here.

Must not: import anything but the standard library. The executor runs this file by path with `python -I`, so
it works with no package on sys.path; nor may it decide anything: it runs what spec.json says.

Run as: python -I supervisor.py <attempt_dir>
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import selectors
import signal
import stat
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

SPEC = "spec.json"
"""Written by the executor before the supervisor starts: argv, workdir, grace and one entry per replica."""
LOCK = "supervisor.lock"
"""Held (flock) by the supervisor for its whole life: free lock + no exit record = the supervisor vanished."""
SUPERVISOR = "supervisor.json"
"""The supervisor's pid and start time, written once it holds the lock."""
JOB = "job.json"
"""The job's process group, its pids and when it started."""
TERMINATE = "terminate.json"
"""Written by the executor's terminate(): when SIGTERM was asked for and the SIGKILL deadline."""
EXIT = "exit.json"
"""The final record: kind (exited or lost), exit code, signal, when, and a detail line."""
OUTPUT = "output.log"
"""The job's stdout and stderr as the supervisor copied them from its pipes. One replica: its bytes as written. A
gang: every replica's lines, each once, each prefixed with its replica's label (`label()`)."""
SUPERVISOR_LOG = "supervisor.log"
"""The supervisor's own diagnostics."""

EXIT_NOT_STARTED = 127
"""Exit code recorded when the job's program could not be started (the shells' "command not found")."""

TICK = 0.05
"""Seconds between the supervisor's checks of its children and of terminate.json."""
READ_SIZE = 65536
READS_PER_PIPE = 16
"""One look at a ready pipe reads at most READ_SIZE * READS_PER_PIPE bytes, so output never delays a tick much."""
MAX_LINE = 65536
"""A gang's line longer than this (no newline yet) is written to the combined log in parts, each labelled."""
DRAIN_LIMIT = 1.0
"""Seconds the supervisor keeps reading after the job has ended, for output still in the pipes. Only a process
that left the job's process group (and so escaped its SIGKILL) can keep a pipe open that long."""


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` atomically (temporary file, fsync, rename, fsync of the directory)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps(data, sort_keys=True).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_json(path: Path) -> dict[str, Any] | None:
    """The record at `path`, or None when it does not exist (records are only ever replaced whole)."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def exit_code_of(returncode: int) -> int:
    """Popen's returncode as the shell convention: a death by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def process_start_id(pid: int) -> str | None:
    """The kernel's start time of `pid` (Linux /proc): tells a process from a later one with the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def replica_output(replica: int) -> str:
    """The name of a gang replica's own output file: its bytes as written, unlabelled."""
    return f"output.{int(replica)}.log"


def label(replica: int, replicas: int) -> bytes:
    """The prefix of a gang replica's lines in the combined log: its rank right-aligned to the widest rank, then
    ": " (the format of `srun --label`, so both executors label the same way)."""
    width = len(str(max(replicas - 1, 0)))
    return f"{replica:>{width}}: ".encode()


def open_log(path: Path) -> int:
    """Open (create) one of the attempt's log files for appending, never through a link or onto a FIFO."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Output:
    """Copies each replica's pipe into the attempt's log files without ever blocking the supervisor's loop.

    The job holds only the write end of a pipe; the files are opened here, before the job starts, and written
    only here. A full disk loses output (reported once in supervisor.log), never the exit record."""

    def __init__(self, directory: Path, replicas: int) -> None:
        self.replicas = replicas
        self.gang = replicas > 1
        self.combined = open_log(directory / OUTPUT)
        self.own = [open_log(directory / replica_output(r)) for r in range(replicas)] if self.gang else []
        self.labels = [label(r, replicas) for r in range(replicas)]
        self.partial = [b""] * replicas
        self.selector = selectors.DefaultSelector()
        self.failed = False
        self.closed = False

    def add(self, replica: int, fd: int) -> None:
        """Start copying `fd` (the read end of replica `replica`'s pipe); this object closes it."""
        os.set_blocking(fd, False)
        self.selector.register(fd, selectors.EVENT_READ, replica)

    @property
    def open_pipes(self) -> int:
        return len(self.selector.get_map())

    def pump(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for output and copy what is ready (a bounded amount per pipe)."""
        if not self.open_pipes:
            time.sleep(timeout)
            return
        for key, _events in self.selector.select(timeout):
            self._read(key.fd, int(key.data))

    def drain(self, limit: float) -> None:
        """Copy what is left in the pipes until every one reaches end of file or `limit` seconds pass."""
        deadline = time.monotonic() + limit
        while self.open_pipes and time.monotonic() < deadline:
            self.pump(min(TICK, max(deadline - time.monotonic(), 0.0)))
        self.close()

    def note(self, text: str) -> None:
        """A line of the supervisor's own in the combined log (e.g. why the program could not start)."""
        self._write(self.combined, f"allotment: {text}\n".encode())

    def close(self) -> None:
        """Flush and close everything (again: nothing)."""
        if self.closed:
            return
        self.closed = True
        for key in list(self.selector.get_map().values()):
            self._finish(key.fd, int(key.data))
        self.selector.close()
        for fd in (self.combined, *self.own):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read(self, fd: int, replica: int) -> None:
        for _ in range(READS_PER_PIPE):
            try:
                data = os.read(fd, READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._finish(fd, replica)
                return
            self._copy(replica, data)

    def _finish(self, fd: int, replica: int) -> None:
        """End of a pipe: its replica's unterminated last line goes out with a newline."""
        self.selector.unregister(fd)
        os.close(fd)
        if self.partial[replica]:
            self._write(self.combined, self.labels[replica] + self.partial[replica] + b"\n")
            self.partial[replica] = b""

    def _copy(self, replica: int, data: bytes) -> None:
        if not self.gang:
            self._write(self.combined, data)
            return
        self._write(self.own[replica], data)
        pending = self.partial[replica] + data
        end = pending.rfind(b"\n") + 1
        tag = self.labels[replica]
        if end:
            self._write(self.combined, b"".join(tag + line for line in pending[:end].splitlines(keepends=True)))
        rest = pending[end:]
        while len(rest) > MAX_LINE:
            self._write(self.combined, tag + rest[:MAX_LINE] + b"\n")
            rest = rest[MAX_LINE:]
        self.partial[replica] = rest

    def _write(self, fd: int, data: bytes) -> None:
        try:
            _write_all(fd, data)
        except OSError as exc:
            if not self.failed:
                self.failed = True
                print(f"output lost: {exc}", file=sys.stderr, flush=True)


class Supervisor:
    def __init__(self, attempt_dir: Path) -> None:
        self.dir = attempt_dir
        spec = read_json(attempt_dir / SPEC)
        if spec is None:
            raise FileNotFoundError(f"{attempt_dir / SPEC} is missing")
        self.argv: list[str] = [str(a) for a in spec["argv"]]
        self.workdir: str = str(spec["workdir"])
        self.grace: int = int(spec["grace"])
        self.replicas: list[dict[str, Any]] = list(spec["replicas"])
        self.account: dict[str, Any] | None = spec.get("account")
        self.memory_mib = int(spec.get("memory_mib") or 0)
        """MiB of memory each replica may have (RLIMIT_DATA); 0: no limit set."""
        """Owner mode: the Unix account (uid, gid, groups, home, shell) every replica runs as; None: this one's."""
        self.pgid = 0
        self.kill_at: float | None = None
        self.killed = False
        self.signalled = False
        self.terminated = False
        self.stop_requested: float | None = None
        self.gang_failed: float | None = None
        self.terminate_mtime: int | None = None

    def _on_signal(self, signum: int, _frame: object) -> None:
        # The supervisor itself was told to stop (e.g. at shutdown): end the job like a preemption.
        self.stop_requested = time.time()

    def _deadline(self, kill_at: float) -> None:
        self.kill_at = kill_at if self.kill_at is None else min(self.kill_at, kill_at)

    def _check_terminate(self, now: float) -> None:
        """Apply terminate.json (from terminate()), a stop of the supervisor itself and a failed replica."""
        path = self.dir / TERMINATE
        try:
            mtime: int | None = path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime is not None and mtime != self.terminate_mtime:
            self.terminate_mtime = mtime
            record = read_json(path)
            if record is not None:
                self.terminated = True
                if record.get("signalled", False):
                    self.signalled = True  # the executor already sent SIGTERM to the group
                self._deadline(float(record["kill_at"]))
        for since, is_stop in ((self.stop_requested, True), (self.gang_failed, False)):
            if since is not None and self.kill_at is None:
                self.terminated = self.terminated or is_stop
                self._deadline(since + self.grace)
        if self.kill_at is not None and not self.signalled:
            self.signalled = True
            signal_group(self.pgid, signal.SIGTERM)
        if self.kill_at is not None and now >= self.kill_at and not self.killed:
            self.killed = True
            signal_group(self.pgid, signal.SIGKILL)

    def _spawn(self, output: Output) -> list[subprocess.Popen[bytes]] | str:
        procs: list[subprocess.Popen[bytes]] = []
        identity: dict[str, Any] = {}
        account = self.account
        if account is not None:
            # The replicas drop to the owner's account, groups included, between fork and exec.
            identity = {"user": int(account["uid"]), "group": int(account["gid"])}
            identity["extra_groups"] = [int(g) for g in account["groups"]]
        for rank, replica in enumerate(self.replicas):
            env = dict(os.environ)
            env.update({str(k): str(v) for k, v in replica["env"].items()})
            read_end, write_end = os.pipe()  # both close-on-exec; Popen gives the job only fds 1 and 2
            output.add(rank, read_end)
            limits = _Limits(replica.get("cpuset"), self.memory_mib)
            try:
                proc = subprocess.Popen(
                    self.argv,
                    **identity,
                    preexec_fn=limits.apply if limits.any else None,  # noqa: PLW1509 (the supervisor has one thread)
                    env=env,
                    cwd=self.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=write_end,
                    stderr=subprocess.STDOUT,
                    close_fds=True,
                    process_group=self.pgid,
                )
            except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument or the environment
                message = f"could not start {self.argv[0]!r}: {exc}"
                output.note(message)
                if procs:
                    signal_group(self.pgid, signal.SIGKILL)
                    for p in procs:
                        p.wait()
                return message
            finally:
                os.close(write_end)  # only the job holds the write end: its exit is the pipe's end of file
            if not procs:
                self.pgid = proc.pid
            procs.append(proc)
        return procs

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        output = Output(self.dir, len(self.replicas))
        try:
            return self._run(output)
        finally:
            output.close()

    def _run(self, output: Output) -> int:
        started = self._spawn(output)
        if isinstance(started, str):
            write_json(
                self.dir / EXIT,
                {
                    "kind": "exited",
                    "exit_code": EXIT_NOT_STARTED,
                    "signal": None,
                    "ended_at": time.time(),
                    "detail": started,
                    "terminated": False,
                },
            )
            return 0
        procs = started
        write_json(
            self.dir / JOB,
            {
                "pgid": self.pgid,
                "pids": [p.pid for p in procs],
                "leader_start_id": process_start_id(self.pgid),
                "started_at": time.time(),
            },
        )
        try:
            returncode = self._wait(procs, output)
        finally:
            # Nothing of the attempt outlives it: stragglers left in its process group are killed.
            signal_group(self.pgid, signal.SIGKILL)
        output.drain(DRAIN_LIMIT)  # what the job wrote last is in the log before the exit record
        self.terminated = self.terminated or (self.dir / TERMINATE).exists()  # asked for just before it ended
        code = exit_code_of(returncode)
        sig = signal.Signals(-returncode).name if returncode < 0 else None
        if sig is not None:
            detail = f"killed by {sig}" + (" after the grace period" if self.killed else "")
        else:
            detail = f"exited with code {code}" + (" after SIGTERM" if self.terminated else "")
        write_json(
            self.dir / EXIT,
            {
                "kind": "exited",
                "exit_code": code,
                "signal": sig,
                "ended_at": time.time(),
                "detail": detail,
                "terminated": self.terminated,
            },
        )
        return 0

    def _wait(self, procs: list[subprocess.Popen[bytes]], output: Output) -> int:
        """Wait for every replica, copying their output meanwhile; the attempt's code is the first non-zero one,
        else 0. Replicas that closed their output early, or children that keep it open, change nothing here."""
        first_failure: int | None = None
        running = list(procs)
        while running:
            for proc in list(running):
                rc = proc.poll()
                if rc is None:
                    continue
                running.remove(proc)
                if rc != 0 and first_failure is None:
                    first_failure = rc
                    if running:
                        # A failed replica ends the gang: the others get SIGTERM and the job's grace.
                        self.gang_failed = time.time()
            if not running:
                break
            self._check_terminate(time.time())
            output.pump(TICK)
        return 0 if first_failure is None else first_failure


class _Limits:
    """What one replica is held to, applied in the child between fork and exec (after it took its account)."""

    def __init__(self, cpuset: list[int] | None, memory_mib: int) -> None:
        self.cpuset = [int(c) for c in cpuset] if cpuset else []
        self.memory = memory_mib * 1024 * 1024
        self.any = bool(self.cpuset) or self.memory > 0

    def apply(self) -> None:
        if self.cpuset:
            os.sched_setaffinity(0, self.cpuset)
        if self.memory > 0:
            # RLIMIT_DATA (Linux >= 4.7: heap and private writable mappings), not RLIMIT_AS: address space a
            # runtime only reserves (inaccessible mappings) is not counted, so reservations do not fail a job
            resource.setrlimit(resource.RLIMIT_DATA, (self.memory, self.memory))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: supervisor.py <attempt_dir>", file=sys.stderr)
        return 2
    attempt_dir = Path(argv[1]).resolve()
    os.chdir(attempt_dir)
    lock_fd = os.open(attempt_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    if (attempt_dir / SUPERVISOR).exists() or (attempt_dir / EXIT).exists():
        return 0  # another supervisor already ran this attempt: launching is idempotent
    write_json(attempt_dir / SUPERVISOR, {"pid": os.getpid(), "started_at": time.time()})
    try:
        return Supervisor(attempt_dir).run()
    except Exception:
        traceback.print_exc()
        with contextlib.suppress(Exception):
            job = read_json(attempt_dir / JOB)
            if job is not None:
                signal_group(int(job["pgid"]), signal.SIGKILL)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
