"""The environment a job runs with, the same for every executor.

Owns: the names and values of the ALLOT_* variables and of CUDA_VISIBLE_DEVICES for one process of an
attempt, the command a session runs when it was given none, and which inherited variables are dropped so that
a job never sees a stale value from the server's environment.
Must not: start processes or read the clock. Standard library and allotment.core/ports only (the GPU check
script runs with nothing but the repository on PYTHONPATH).
"""

from __future__ import annotations

from collections.abc import Mapping

from allotment.core.model import Allocation
from allotment.ports.executor import LaunchSpec

MANAGED_PREFIXES = ("ALLOT_",)
"""Inherited variables with these prefixes are dropped: only the executor sets them."""

MANAGED_NAMES = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})
"""Inherited variables with these names are dropped and set by the executor."""


CHECKPOINT_VARIABLE = "ALLOT_CHECKPOINT_FILE"
"""The variable naming the file a job touches each time it has saved a checkpoint (rule `least-lost-work`); each
executor names a file of its own (the SDK's report_checkpoint() touches it)."""

SESSION_COMMAND = ("sleep", "infinity")
"""What a session runs when its owner gave no command: it only holds the GPUs for clients that attach."""


def job_command(spec: LaunchSpec) -> tuple[str, ...]:
    """The argument vector to run: the spec's, or SESSION_COMMAND for a session submitted without one."""
    if not spec.command and spec.kind == "session":
        return SESSION_COMMAND
    return tuple(spec.command)


def is_managed(name: str) -> bool:
    """True when the executor owns the variable: neither the server's environment nor spec.env sets it."""
    return name in MANAGED_NAMES or name.startswith(MANAGED_PREFIXES)


def job_environment(spec: LaunchSpec, rank: int) -> dict[str, str]:
    """The variables the executor sets for the process of replica `rank` (its placement[rank]).

    spec.env comes first; the executor's own variables override it:

    - CUDA_VISIBLE_DEVICES: the GPU indices of this replica's allocation on its node, comma-separated (the
      empty string for a 0-GPU job, which hides every GPU); CUDA_DEVICE_ORDER=PCI_BUS_ID so that the indices
      mean what nvidia-smi shows.
    - ALLOT_JOB_ID, ALLOT_ATTEMPT and ALLOT_RESTART_COUNT (both the attempt number: 0 first, then 1, 2, …),
      ALLOT_BUDGET, ALLOT_USER, ALLOT_KIND, ALLOT_GRACE (seconds between SIGTERM and SIGKILL),
      ALLOT_SLICE_END (Unix seconds; empty when the run has no slice), ALLOT_NODE (this replica's node),
      ALLOT_GPUS (the number of GPUs this process was given), ALLOT_NODES (every node of the attempt, comma-
      separated, in replica order), ALLOT_REPLICA (this replica's rank) and ALLOT_REPLICAS (how many there
      are).
    - For a task of a job array (Slurm's SLURM_ARRAY_*): ALLOT_ARRAY_JOB_ID (the array's id), ALLOT_ARRAY_INDEX
      (this task's index; SLURM_ARRAY_TASK_ID), ALLOT_ARRAY_TASK_COUNT, ALLOT_ARRAY_TASK_MIN and
      ALLOT_ARRAY_TASK_MAX (the array's lowest and highest index).
    """
    allocation: Allocation = spec.placement[rank]
    env = {k: v for k, v in spec.env.items() if not is_managed(k)}
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in allocation.gpus),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "ALLOT_JOB_ID": spec.job_id,
            "ALLOT_ATTEMPT": str(spec.attempt),
            "ALLOT_RESTART_COUNT": str(spec.attempt),
            "ALLOT_BUDGET": spec.budget,
            "ALLOT_USER": spec.user,
            "ALLOT_KIND": spec.kind,
            "ALLOT_GRACE": str(spec.grace),
            "ALLOT_SLICE_END": "" if spec.slice_end is None else str(spec.slice_end),
            "ALLOT_NODE": allocation.node,
            "ALLOT_GPUS": str(len(allocation.gpus)),
            "ALLOT_NODES": ",".join(a.node for a in spec.placement),
            "ALLOT_REPLICA": str(rank),
            "ALLOT_REPLICAS": str(len(spec.placement)),
        }
    )
    if spec.array is not None:
        a = spec.array
        env.update(
            {
                "ALLOT_ARRAY_JOB_ID": a.array_id,
                "ALLOT_ARRAY_INDEX": str(a.index),
                "ALLOT_ARRAY_TASK_COUNT": str(a.count),
                "ALLOT_ARRAY_TASK_MIN": str(a.first),
                "ALLOT_ARRAY_TASK_MAX": str(a.last),
            }
        )
    return env


def inherited_environment(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without the variables the executor owns."""
    return {k: v for k, v in base.items() if not is_managed(k)}
