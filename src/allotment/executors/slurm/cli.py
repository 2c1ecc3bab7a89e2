"""Running Slurm's command-line clients and reading what they print.

Owns: the one place that starts sbatch, scontrol, scancel, squeue and sinfo (argument vectors only, never a shell,
with SLURM_CONF set and a timeout), and the parsers for their output: host lists (`gpu[01-03,07]`), GRES index
lists (`gpu:2(IDX:0-1)`), exit codes and the JSON records of squeue and sinfo.
Must not: decide anything or keep state; callers decide which command to run and what the answer means.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from allotment.ports.executor import ExecutorUnavailable


class SlurmError(ExecutorUnavailable):
    """A Slurm command failed (non-zero exit status, timeout, output that could not be read, or JSON output that
    reports errors). It is the Executor port's ExecutorUnavailable, so the server retries after a backoff."""

    def __init__(self, argv: Sequence[str], message: str) -> None:
        super().__init__(f"{' '.join(argv)}: {message}")
        self.argv = tuple(argv)
        self.message = message


SUBMIT_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "SHELL")
"""The only variables of the server's environment that sbatch (and so a job) sees."""


def submit_environment() -> dict[str, str]:
    env = {k: os.environ[k] for k in SUBMIT_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


@dataclass(frozen=True, slots=True)
class SlurmCli:
    """Runs Slurm's clients against one cluster (the one `conf` describes, or the environment's default)."""

    conf: str | None = None
    """Path of slurm.conf; None uses SLURM_CONF from the environment (or Slurm's compiled-in default)."""
    timeout: float = 30.0

    def run(
        self, argv: Sequence[str], stdin: str | None = None, check: bool = True, env: Mapping[str, str] | None = None
    ) -> str:
        """Run one Slurm client; `env` replaces this process's environment (SLURM_CONF is always added)."""
        env = dict(os.environ if env is None else env)
        if self.conf is not None:
            env["SLURM_CONF"] = self.conf
        try:
            done = subprocess.run(
                list(argv),
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as e:
            raise SlurmError(argv, f"not installed ({e})") from e
        except subprocess.TimeoutExpired as e:
            raise SlurmError(argv, f"no answer within {self.timeout:g} s") from e
        if check and done.returncode != 0:
            raise SlurmError(argv, f"exit status {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def sbatch(self, args: Sequence[str], script_path: str, identity: Mapping[str, str] | None = None) -> int:
        """Submit a batch script with `--parsable`; returns the Slurm job id. sbatch runs with a minimal
        environment (SUBMIT_ENV), so that `--export=ALL` hands the job nothing of this process's environment;
        `identity` (owner mode: the owner's HOME, USER, LOGNAME, SHELL) replaces the server's."""
        argv = ["sbatch", "--parsable", *args, script_path]
        out = self.run(argv, env={**submit_environment(), **(identity or {})}).strip()
        first = out.split(";", 1)[0]
        if not first.isdigit():
            raise SlurmError(argv, f"unexpected answer {out!r}")
        return int(first)

    def scontrol(self, *args: str, check: bool = True) -> str:
        return self.run(["scontrol", *args], check=check)

    def scancel(self, *args: str, check: bool = False) -> str:
        """scancel; by default a job that already ended is not an error."""
        return self.run(["scancel", *args], check=check)

    def jobs(self) -> dict[int, dict[str, Any]]:
        """Every job slurmctld still remembers (pending, running and recently ended), by job id."""
        data = self._json(["squeue", "--json"])
        out: dict[int, dict[str, Any]] = {}
        for job in data.get("jobs", []):
            if isinstance(job, dict) and isinstance(job.get("job_id"), int):
                out[job["job_id"]] = job
        return out

    def nodes(self) -> list[dict[str, Any]]:
        """Every node as sinfo --json describes it."""
        data = self._json(["sinfo", "--json"])
        return [n for n in data.get("nodes", []) if isinstance(n, dict)]

    def steps(self, job_id: int) -> list[str]:
        """The step ids (`12.0`, `12.batch`, …) of a running job."""
        out = self.run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i"], check=False)
        return [line.strip() for line in out.splitlines() if line.strip()]

    def _json(self, argv: Sequence[str]) -> dict[str, Any]:
        return json_answer(argv, self.run(argv))


def json_answer(argv: Sequence[str], out: str) -> dict[str, Any]:
    """The JSON object a Slurm client printed; SlurmError when it is unreadable or reports errors."""
    try:
        data = json.loads(out)
    except json.JSONDecodeError as e:
        raise SlurmError(argv, f"unreadable JSON ({e})") from e
    if not isinstance(data, dict):
        raise SlurmError(argv, "unexpected JSON")
    errors = data.get("errors")
    if errors:
        # Slurm 22.05 exits 0 with an empty list and an `errors` entry when slurmctld does not answer: read as
        # "no jobs, no nodes", every running job would look lost.
        raise SlurmError(argv, f"Slurm reported errors: {json.dumps(errors)}")
    return data


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(expr: str) -> list[str]:
    """`gpu[01-03,07],cpu1` → ['gpu01', 'gpu02', 'gpu03', 'gpu07', 'cpu1'] (one bracket group per name)."""
    names: list[str] = []
    for part in _split_top(expr.strip()):
        if not part:
            continue
        m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", part)
        if m is None:
            names.append(part)
            continue
        prefix, body, suffix = m.groups()
        for item in body.split(","):
            r = _RANGE.match(item)
            if r is None:
                raise ValueError(f"bad host list {expr!r}")
            lo, hi = r.group(1), r.group(2) or r.group(1)
            width = len(lo)
            names.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1))
    return names


def _split_top(expr: str) -> list[str]:
    """Split on commas outside brackets."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return parts


def parse_index_list(text: str) -> tuple[int, ...]:
    """`0-1,4` → (0, 1, 4)."""
    out: list[int] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item or item == "N/A":
            continue
        r = _RANGE.match(item)
        if r is None:
            raise ValueError(f"bad index list {text!r}")
        out.extend(range(int(r.group(1)), int(r.group(2) or r.group(1)) + 1))
    return tuple(out)


def gpu_indices(gres_detail: str) -> tuple[int, ...]:
    """The GPU indices in one node's GRES detail: `gpu:2(IDX:0-1)` or `gpu:h100:2(IDX:0,3)` → (0, 1) / (0, 3)."""
    out: list[int] = []
    for m in re.finditer(r"gpu(?::[^:(,]+)?:\d+\(IDX:([0-9,\-]+|N/A)\)", gres_detail):
        out.extend(parse_index_list(m.group(1)))
    return tuple(out)


def gres_gpu_count(gres: str) -> tuple[int, str | None]:
    """The GPU count and type in a node's configured GRES: `gpu:8` → (8, None); `gpu:h100:4(S:0)` → (4, 'h100')."""
    total, kind = 0, None
    for item in _split_top(gres):
        m = re.match(r"^gpu(?::([A-Za-z0-9_.\-]+))?:(\d+)", item.strip())
        if m is None:
            continue
        total += int(m.group(2))
        kind = kind or m.group(1)
    return total, kind


def exit_code(raw: object) -> int | None:
    """A job's exit code as a shell reports it: the code, or 128 + signal when a signal ended it.

    Slurm 22.05 gives the raw wait status (code << 8 | signal); newer releases give a record with
    `return_code` and `signal`.
    """
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        sig = raw & 0x7F
        return 128 + sig if sig else (raw >> 8) & 0xFF
    if isinstance(raw, Mapping):
        signal = raw.get("signal")
        sig_id = signal.get("id") if isinstance(signal, Mapping) else None
        if isinstance(sig_id, Mapping):
            sig_id = sig_id.get("number") if sig_id.get("set", True) else None
        if isinstance(sig_id, int) and sig_id > 0:
            return 128 + sig_id
        code = raw.get("return_code")
        if isinstance(code, Mapping):
            code = code.get("number") if code.get("set", True) else None
        return code if isinstance(code, int) else None
    return None


def job_state(job: Mapping[str, Any]) -> str:
    """The base state of a squeue JSON job (`RUNNING`, `COMPLETED`, …), whatever the Slurm release's format."""
    state = job.get("job_state")
    if isinstance(state, list):
        state = state[0] if state else ""
    return str(state or "").upper()


def epoch(value: object) -> int | None:
    """A squeue JSON time (an integer, or {"set": …, "number": …} in newer releases); None when unset."""
    if isinstance(value, Mapping):
        value = value.get("number") if value.get("set", True) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
