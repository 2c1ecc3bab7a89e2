"""The batch script and sbatch options for one attempt.

Owns: turning a LaunchSpec into (a) a bash batch script in which every value that came from a user (the argument
vector, spec.env, job id, budget, user) appears only as a shlex-quoted word, and (b) the sbatch argument vector
(held, node count, GPUs per node, CPUs and memory per node, name, output file, requeue allowed, no inherited
environment, and in owner mode the account Slurm runs the job as).
Must not: run anything, or interpolate a user string into the script or a `#SBATCH` line unquoted.

The script exports the ALLOT_* variables (the same names as every executor: allotment.executors.environment),
then `exec srun` runs the command once per node. Because the batch shell becomes srun, a SIGTERM that Slurm sends
to the batch step (requeue, Slurm's own preemption) is forwarded by srun to every task, and `scancel
--signal=TERM` reaches the tasks as a step signal. Per-node values (ALLOT_NODE, ALLOT_REPLICA, ALLOT_GPUS) are set
by a fixed bash prelude inside each task; the user's argv reaches it as positional parameters ("$@"), never as
text to parse.
"""

from __future__ import annotations

import hashlib
import re
import shlex

from allotment.executors.accounts import Account
from allotment.executors.environment import CHECKPOINT_VARIABLE, job_environment
from allotment.ports.executor import LaunchSpec

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

PER_TASK = frozenset({"CUDA_VISIBLE_DEVICES", "ALLOT_NODE", "ALLOT_GPUS", "ALLOT_REPLICA"})
"""Variables that differ per node: Slurm sets CUDA_VISIBLE_DEVICES, the task prelude sets the others."""

COMPUTED = frozenset({"ALLOT_ATTEMPT", "ALLOT_RESTART_COUNT", "ALLOT_SLICE_END"})
"""Variables the script computes at run time (they change when Slurm requeues the job)."""

SLICE_COMMENT = "allot-slice-end="
"""Prefix of the Slurm job comment that carries the current run's slice end across a requeue."""

# Runs inside each srun task: per-node variables, then the user's argv ("$@") replaces the shell.
_TASK_PRELUDE = (
    'export ALLOT_NODE="${SLURMD_NODENAME:-$(hostname -s)}"; '
    "ALLOT_REPLICA=0; _allot_i=0; "
    'for _allot_n in ${ALLOT_NODES//,/ }; do [ "$_allot_n" = "$ALLOT_NODE" ] && ALLOT_REPLICA=$_allot_i; '
    "_allot_i=$((_allot_i + 1)); done; export ALLOT_REPLICA; "
    'if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then _allot_g=${CUDA_VISIBLE_DEVICES//[!,]/}; '
    "export ALLOT_GPUS=$(( ${#_allot_g} + 1 )); else export ALLOT_GPUS=0; fi; "
    "unset _allot_i _allot_n _allot_g; "
    'exec "$@"'
)


def job_name(job_id: str, attempt: int) -> str:
    """A Slurm job name for (job_id, attempt): a readable part plus a hash of the exact job id (the executor
    appends a random token so that names stay unique across executors sharing a cluster)."""
    readable = re.sub(r"[^A-Za-z0-9_.\-]", "_", job_id)[:40]
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:8]
    return f"allot.{readable}.{digest}.{attempt}"


def gpus_per_node(spec: LaunchSpec) -> int:
    """The GPUs per node of a placement; Slurm asks one count for every node of a job."""
    if not spec.placement:
        raise ValueError(f"job {spec.job_id!r}: empty placement")
    nodes = [a.node for a in spec.placement]
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"job {spec.job_id!r}: a node appears twice in the placement {nodes}")
    counts = {len(a.gpus) for a in spec.placement}
    if len(counts) != 1:
        raise ValueError(
            f"job {spec.job_id!r}: the Slurm executor needs the same GPU count on every node, got "
            + ", ".join(f"{a.node}={len(a.gpus)}" for a in spec.placement)
        )
    return counts.pop()


def sbatch_args(
    spec: LaunchSpec,
    name: str,
    output: str,
    partition: str | None = None,
    extra: tuple[str, ...] = (),
    account: Account | None = None,
    workdir: str | None = None,
) -> list[str]:
    """The sbatch options (each one argv element; nothing passes through a shell). `account` (owner mode): Slurm
    runs the job as that Unix account (`--uid`/`--gid`, which only a privileged submitter may use); `workdir`: the
    job's directory when the spec names none."""
    k = gpus_per_node(spec)
    args = [
        "--hold",
        f"--nodes={len(spec.placement)}",
        "--ntasks-per-node=1",
        f"--job-name={name}",
        f"--output={output}",
        "--open-mode=append",
        "--requeue",
        # The job gets sbatch's own environment, which SlurmCli.sbatch keeps minimal (no server secrets).
        # Not --export=NONE: that makes Slurm load the user's login environment on the node, which serialises
        # job starts per node (measured: ~0.15 s per job on one node, versus all in parallel).
        "--export=ALL",
        f"--comment={SLICE_COMMENT}{'' if spec.slice_end is None else spec.slice_end}",
    ]
    if k > 0:
        args.append(f"--gres=gpu:{k}")
    # one task per node runs every replica placed there, so the node's CPUs and memory (replicas × the request, as
    # placement counted them: decision 60) are the task's; nothing is asked when the job asks for none
    if spec.cpus > 0:
        args.append(f"--cpus-per-task={spec.cpus}")
    if spec.memory > 0:
        args.append(f"--mem={spec.memory}M")
    if account is not None:
        args += [f"--uid={account.uid}", f"--gid={account.gid}"]
    chdir = spec.workdir if spec.workdir is not None else workdir
    if chdir is not None:
        args.append(f"--chdir={chdir}")
    if partition is not None:
        args.append(f"--partition={partition}")
    args.extend(extra)
    return args


def batch_script(spec: LaunchSpec, checkpoint_file: str | None = None) -> str:
    """The batch script for the first run of `spec` (and, unchanged, for its requeued runs). `checkpoint_file`: the
    file the job touches each time it has saved a checkpoint (ALLOT_CHECKPOINT_FILE), one for all its runs."""
    if spec.image is not None:
        raise ValueError(f"job {spec.job_id!r}: container images are not supported by the Slurm executor")
    if not spec.command:
        raise ValueError(f"job {spec.job_id!r}: empty command")
    gpus_per_node(spec)
    for name in spec.env:
        if not _ENV_NAME.match(name):
            raise ValueError(f"job {spec.job_id!r}: {name!r} is not a valid environment variable name")
    env = job_environment(spec, 0)
    lines = [
        "#!/bin/bash",
        f"# Written by allotment.executors.slurm for {job_name(spec.job_id, spec.attempt)}.",
        "# Every value below that came from a user is one shell-quoted word.",
    ]
    for name, value in env.items():
        if name in PER_TASK or name in COMPUTED:
            continue
        lines.append(f"export {name}={shlex.quote(value)}")
    slice_end = "" if spec.slice_end is None else str(spec.slice_end)
    lines += [
        # A requeued run (SLURM_RESTART_COUNT set) is attempt base + restarts, with the slice end the requeue
        # wrote into the job's comment.
        f"export ALLOT_ATTEMPT=$(( {int(spec.attempt)} + ${{SLURM_RESTART_COUNT:-0}} ))",
        'export ALLOT_RESTART_COUNT="$ALLOT_ATTEMPT"',
        f"export ALLOT_SLICE_END={shlex.quote(slice_end)}",
        'if [ -n "${SLURM_RESTART_COUNT:-}" ]; then',
        '  _allot_c=$(scontrol -o show job "$SLURM_JOB_ID" 2>/dev/null'
        f" | grep -o 'Comment={SLICE_COMMENT}[0-9]*' | head -n 1)",
        f'  [ -n "$_allot_c" ] && export ALLOT_SLICE_END="${{_allot_c#Comment={SLICE_COMMENT}}}"',
        "  unset _allot_c",
        "fi",
        *([f"export {CHECKPOINT_VARIABLE}={shlex.quote(checkpoint_file)}"] if checkpoint_file is not None else []),
        # The step takes the script's environment (sbatch's minimal one plus the exports above).
        "export SLURM_EXPORT_ENV=ALL",
        "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "
        + shlex.quote(_TASK_PRELUDE)
        + " allot-task "
        + " ".join(shlex.quote(arg) for arg in spec.command),
        "",
    ]
    return "\n".join(lines)
