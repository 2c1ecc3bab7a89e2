"""`allot attach JOB`: a shell (or one command) inside a running session's environment on the session's host.

Owns: finding the session's running attempt in the local executor's state directory (`<data dir>/executor`),
starting the user's $SHELL (else bash) — or the argument vector given after `--`, never through a shell — with the
session's CUDA_VISIBLE_DEVICES, ALLOT_* variables and working directory, holding a client lease for as long as it
runs (the executor reports ATTACHED / DETACHED from it, which keeps an attended session from being reclaimed as
idle), and ending the client when the session itself is told to leave: SIGTERM (SIGHUP for an interactive shell)
when the session is terminated, SIGKILL at the session's own kill deadline or when it has ended.

Must not: signal the session's processes, decide anything, or talk to the scheduler's database (the executor's
files are the contract).
"""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from allotment.executors.local import sessions
from allotment.executors.local import supervisor as sv

TICK = 0.1
"""Seconds between the client's checks of its child and of the session's terminate / exit records."""
ENDED_GRACE = 2.0
"""Seconds a client has to leave after its session ended by itself (no kill deadline was set)."""


@dataclass(frozen=True, slots=True)
class AttachResult:
    exit_code: int
    """The child's exit code in the shell convention (128 + N when it died of signal N)."""
    ended_by_session: bool
    """True when the client was ended because the session was terminated or ended."""


def default_shell() -> list[str]:
    shell = os.environ.get("SHELL") or "bash"
    return [shell]


def attach(
    state_dir: Path, job_id: str, command: list[str] | None = None, *, interactive: bool | None = None
) -> AttachResult:
    """Run `command` (default: the user's shell) in the session's environment until it exits or the session
    leaves. Raises sessions.AttachError when the job cannot be attached to."""
    try:
        d = sessions.running_attempt(state_dir, job_id)
        ctx = sessions.session_context(d)
    except PermissionError as exc:
        raise sessions.AttachError(
            f"{exc.filename} belongs to the server's account (owner mode): attach as it, e.g. `sudo allot attach "
            f"{job_id}`; the client then runs as the session's owner"
        ) from None
    argv = command if command else default_shell()
    tty = interactive if interactive is not None else not command
    env = sessions.client_environment(ctx, os.environ)
    identity: dict[str, Any] = {}
    account = ctx.account
    if account is not None and os.geteuid() != int(account["uid"]):
        # Owner mode: the client runs as the session's owner, never as the (privileged) account attaching it.
        identity = {"user": int(account["uid"]), "group": int(account["gid"])}
        identity["extra_groups"] = [int(g) for g in account["groups"]]
        if not command:
            argv = [account["shell"] or "/bin/sh"]
    with sessions.client_lease(d, getpass.getuser()):
        # An interactive shell stays in the terminal's foreground process group; a command gets its own group so
        # that everything it starts can be ended with it.
        child = subprocess.Popen(argv, env=env, cwd=ctx.workdir, process_group=None if tty else 0, **identity)
        return _watch(child, d, tty)


def _watch(child: subprocess.Popen[bytes], d: Path, tty: bool) -> AttachResult:
    first = signal.SIGHUP if tty else signal.SIGTERM
    signalled = False
    killed = False
    ended_at: float | None = None
    while True:
        try:
            rc = child.wait(timeout=TICK)
        except subprocess.TimeoutExpired:
            pass
        else:
            return AttachResult(sv.exit_code_of(rc), signalled)
        now = time.time()
        term = sv.read_json(d / sv.TERMINATE)
        if ended_at is None and (d / sv.EXIT).exists():
            ended_at = now
        if (term is not None or ended_at is not None) and not signalled:
            signalled = True
            _signal(child, first, tty)
        deadlines = [float(term["kill_at"])] if term is not None else []
        if ended_at is not None:
            deadlines.append(ended_at + ENDED_GRACE)
        if not killed and deadlines and now >= min(deadlines):
            killed = True
            _signal(child, signal.SIGKILL, tty)


def _signal(child: subprocess.Popen[bytes], sig: int, tty: bool) -> None:
    try:
        if tty:
            os.kill(child.pid, sig)
        else:
            os.killpg(child.pid, sig)
    except ProcessLookupError:
        pass
