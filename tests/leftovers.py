"""What a test session left running: found at the end of the session, reported, ended, and failing the run.

Owns: finding processes a test left behind (Linux /proc): descendants of this pytest process, and processes anywhere
whose working directory or command line lies in this session's temporary directory (a job whose supervisor died is
re-parented to init, a detached supervisor or server started by a test); and `slurmstepd`s of a Slurm test cluster
this process leased whose job no longer exists in that cluster (a step outlives its job when its node was set DOWN
or its slurmd went away; it ignores SIGTERM).
Must not: flag what is not the tests' own: pytest itself, pytest-xdist's workers (execnet gateways), the shared
Slurm, PostgreSQL or MariaDB daemons (they are not descendants, and they run outside the temporary directory), or
zombies (they hold nothing); nor end anything it did not flag.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
XDIST_WORKER = "import sys;exec(eval(sys.stdin.readline()))"
"""The command line execnet starts each pytest-xdist worker with."""
STEP = re.compile(r"^slurmstepd: \[(\d+)\.")
"""slurmstepd names itself `slurmstepd: [<job>.<step>]`."""


@dataclass(frozen=True, slots=True)
class Leftover:
    pid: int
    why: str
    cmdline: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.why}): {self.cmdline[:200]}"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _cmdline(pid: int) -> str:
    return _read(PROC / str(pid) / "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of `pid`, or None when it is gone."""
    fields = _read(PROC / str(pid) / "stat").decode(errors="replace").rsplit(")", 1)[-1].split()
    return (fields[0], int(fields[1])) if len(fields) > 1 else None


def _pids() -> list[int]:
    return [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]


def _live(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[1], []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _in_dir(pid: int, root: str) -> bool:
    with contextlib.suppress(OSError):
        cwd = os.readlink(PROC / str(pid) / "cwd")
        if cwd == root or cwd.startswith(root + "/"):
            return True
    return root in _cmdline(pid)


def stray_slurm_steps(confs: Iterable[str], *, every: bool = False) -> list[Leftover]:
    """slurmstepd processes of the clusters with these slurm.conf paths whose job that cluster no longer has (with
    `every`: all of them, for a cluster whose jobs have all been cancelled)."""
    confs = set(confs)
    found: list[Leftover] = []
    jobs: dict[str, set[str] | None] = {}
    for pid in _pids():
        match = STEP.match(_cmdline(pid))
        if match is None or not _live(pid):
            continue
        conf = _cluster_of(pid, confs)
        if conf is None:
            continue
        if conf not in jobs:
            jobs[conf] = set() if every else slurm_jobs(conf)
        known = jobs[conf]
        if known is None or match.group(1) not in known:
            why = f"slurmstepd of job {match.group(1)}, which {conf} no longer has"
            found.append(Leftover(pid, why, _cmdline(pid)))
    return found


def _cluster_of(pid: int, confs: set[str]) -> str | None:
    """Which of `confs` a slurmstepd belongs to: the SLURM_CONF it inherited from its slurmd, else the cluster whose
    state directory (scripts/slurm-cluster: `<dir>/etc/slurm.conf`) holds its working directory (a slurmd spool)."""
    environ = _read(PROC / str(pid) / "environ").split(b"\0")
    conf = next((e[len(b"SLURM_CONF=") :].decode() for e in environ if e.startswith(b"SLURM_CONF=")), None)
    if conf is not None:
        return conf if conf in confs else None
    for candidate in confs:
        if _in_dir(pid, str(Path(candidate).parent.parent)):
            return candidate
    return None


def slurm_jobs(conf: str) -> set[str] | None:
    """The job ids the cluster knows (any state), or None when it does not answer (stopped)."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i"],
            env={**os.environ, "SLURM_CONF": conf},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(out.stdout.split()) if out.returncode == 0 else None


def leftovers(tmp_root: Path | None, slurm_confs: Iterable[str] = ()) -> list[Leftover]:
    """Everything this session left running (see the module docstring)."""
    me = os.getpid()
    found: dict[int, Leftover] = {}
    for pid in sorted(descendants(me)):
        cmdline = _cmdline(pid)
        if _live(pid) and XDIST_WORKER not in cmdline:
            found[pid] = Leftover(pid, "a descendant of pytest", cmdline)
    if tmp_root is not None:
        root = str(tmp_root.resolve())
        for pid in _pids():
            if pid != me and pid not in found and _live(pid) and _in_dir(pid, root):
                cmdline = _cmdline(pid)
                if XDIST_WORKER not in cmdline:
                    found[pid] = Leftover(pid, f"runs in {root}", cmdline)
    for step in stray_slurm_steps(slurm_confs):
        found.setdefault(step.pid, step)
    return sorted(found.values(), key=lambda x: x.pid)


def settle(tmp_root: Path | None, slurm_confs: Iterable[str] = (), grace: float = 10.0) -> list[Leftover]:
    """The leftovers still there after `grace` seconds (processes being stopped get that long to exit)."""
    confs = list(slurm_confs)
    deadline = time.monotonic() + grace
    while (found := leftovers(tmp_root, confs)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def end(found: Iterable[Leftover]) -> None:
    """SIGKILL what was found (a leftover that ignored SIGTERM is why it is left)."""
    for leftover in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(leftover.pid, signal.SIGKILL)
