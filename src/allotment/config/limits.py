"""Every bound on what a client may send, with its default, in one place (docs/security.md lists them).

Owns: the numbers — the request body size (the one limit an operator may change: `Settings.max_body_bytes`, `allot
server --max-body-bytes`, $ALLOT_MAX_BODY_BYTES), the sizes of what reaches a process (arguments, environment,
working directory, image), of names and free text, the ranges of integers (GPUs, replicas, durations, credits,
query parameters) and the shape of YAML documents (nesting depth, values after aliases) — and `check_text`, the
one rule for NUL bytes, which no process argument, environment variable, path or database text can hold.

Must not: enforce anything itself: the API's body limit (ops.bounds), the request models (api.schemas), the spec
and plan models (service.specs, config.fields) and the YAML reader (service.yamlinput) apply these numbers.
"""

from __future__ import annotations

KIB = 1024

MAX_BODY_BYTES = 1024 * KIB
"""Default request body limit (bytes): a larger body is refused with 413 while it streams in."""

MAX_ARGS = 4096
"""Arguments of a command (argv entries)."""
MAX_ARG_CHARS = 32 * KIB
"""Characters of one argument."""
MAX_ENV_ENTRIES = 256
"""Variables in a job's environment."""
MAX_ENV_NAME = 200
"""Characters of an environment variable's name."""
MAX_ENV_VALUE = 32 * KIB
"""Characters of an environment variable's value."""
MAX_LAUNCH_CHARS = 256 * KIB
"""Characters of argv and environment together (names, values and arguments): well under Linux's ARG_MAX (2 MiB
with the default stack), so every accepted job can be started."""
MAX_WORKDIR = 4096
"""Characters of a working directory (PATH_MAX)."""
MAX_IMAGE = 500
"""Characters of a container image reference."""
MAX_NAME = 64
"""Characters of a name (budgets, clusters, GPU types, users, jobs, windows)."""
MAX_CHOICES = 64
"""GPU types, or clusters, one job may list."""
MAX_TEXT = 4096
"""Characters of free text (a drain's or a plan's `why`, a token's name)."""
MAX_TOKEN_NAME = 200
"""Characters of an API token's name."""
MAX_REQUEST_ID = 150
"""Characters of a client request id (Idempotency-Key)."""

MAX_ARRAY_TASKS = 10_000
"""Tasks of one job array (sbatch --array; Slurm's MaxArraySize defaults to 1001): one submission writes them all."""
MAX_ARRAY_INDEX = 999_999
"""The largest index of an array task."""
MAX_ARRAY_CHARS = 1000
"""Characters of an array's index expression (`0-999%50`)."""

MAX_GPUS_PER_REPLICA = 1024
"""GPUs per replica in any request (the fleet's largest node bounds it further: service.shapes)."""
MAX_REPLICAS = 65536
"""Replicas of one job in any request (the fleet bounds it further: service.shapes)."""
MAX_CPUS = 1 << 20
"""CPUs per replica, or of one node, in any request or configuration."""
MAX_MEMORY_MIB = 1 << 40
"""MiB of memory per replica, or of one node (2^40 MiB is an exbibyte): inside a 64-bit integer in bytes."""
MAX_COUNT = 2**31 - 1
"""Any other whole count in a document (node counts, a budget's max_gpus, a window's GPUs): a 32-bit integer."""
MAX_DURATION = 10 * 365 * 86400
"""Seconds of any duration (slices, grace, max_runtime, token lifetimes, burn windows): ten years."""
MAX_CREDITS = 10**12
"""Credits of any amount (an allocation, a rate): 10^12 credits is 10^18 micro-credits, inside a 64-bit integer."""
MAX_OFFSET = 2**62
"""A byte offset in a query (a log's offset)."""

MAX_YAML_DEPTH = 32
"""Nesting levels of a YAML document (a spec needs 3, a plan 4)."""
MAX_YAML_VALUES = 100_000
"""Values of a YAML document once its aliases are expanded (refuses 'billion laughs')."""

NUL_REASON = "contains a NUL byte (\\0), which no process argument, environment variable, path or database text holds"


def check_text(value: str) -> str:
    """`value` unchanged; ValueError when it holds a NUL byte."""
    if "\x00" in value:
        raise ValueError(NUL_REASON)
    return value
