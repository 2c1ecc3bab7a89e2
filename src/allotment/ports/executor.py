"""The Executor port: how the engine makes decisions real and hears what happened.

Owns: the Executor Protocol, the launch specification handed to it, the events it reports, and the error that
means "the executor cannot act now" (ExecutorUnavailable).
Must not: decide anything. Executors start exactly what they are told, where they are told, and report back.

Contract every executor keeps:
- launch() is idempotent per (job_id, attempt): launching an attempt that is already running or has finished is a
  no-op, so the engine can re-send intents after a crash.
- terminate() sends SIGTERM (or the engine's equivalent) now and SIGKILL after `grace` seconds; repeating it does not
  restart the grace period.
- poll() returns each event once (started, exited with its code, lost with its node); after a restart of the engine
  an executor rebuilds what it knows from its own durable state, and alive() tells which attempts still run.
- Any call may raise ExecutorUnavailable (or a subclass, e.g. SlurmError) when what the executor drives does not
  answer or refuses; the server ends the engine loop and starts it again after a backoff (reconcile, then cycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from allotment.core.model import Allocation


class ExecutorUnavailable(RuntimeError):
    """The executor could not carry out a call now: the workload manager behind it did not answer, refused, or
    answered unreadably. Transient by contract: nothing of the cycle is lost (undelivered intents stay in the
    outbox), and the server retries the engine loop after a backoff."""


@dataclass(frozen=True, slots=True)
class ArrayPosition:
    """Where a task of a job array stands in it (Slurm's SLURM_ARRAY_* variables): the array's id, this task's
    index, how many tasks the array has and its lowest and highest index."""

    array_id: str
    index: int
    count: int
    first: int
    last: int

    def as_json(self) -> dict[str, object]:
        """As a job's spec and an outbox payload keep it."""
        return {"id": self.array_id, "index": self.index, "count": self.count, "min": self.first, "max": self.last}

    @staticmethod
    def of(raw: object) -> ArrayPosition | None:
        """From `as_json`'s mapping (None for a job that is no array task)."""
        if not isinstance(raw, Mapping):
            return None
        return ArrayPosition(str(raw["id"]), int(raw["index"]), int(raw["count"]), int(raw["min"]), int(raw["max"]))


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    job_id: str
    attempt: int
    """0 for the first run, then 1, 2, … after each requeue (the restart count)."""
    command: tuple[str, ...]
    """An argument vector: never passed through a shell."""
    placement: tuple[Allocation, ...]
    budget: str
    user: str
    kind: str
    grace: int
    slice_end: int | None
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    image: str | None = None
    cpus: int = 0
    """CPUs the run holds on each node of its placement, as placement counted them (its replicas there × the job's
    request per replica); 0: no request (decision 60)."""
    memory: int = 0
    """MiB of memory the run holds on each node of its placement; 0: no request."""
    array: ArrayPosition | None = None
    """The job array this attempt's job is a task of, and its index there (ALLOT_ARRAY_*)."""


class EventKind(StrEnum):
    STARTED = "started"
    EXITED = "exited"
    LOST = "lost"  # the node or the process vanished; the job did not exit by itself
    ATTACHED = "attached"  # sessions: a client attached
    DETACHED = "detached"  # sessions: the last client detached
    CHECKPOINTED = "checkpointed"  # the job saved a checkpoint (rule `least-lost-work`)


@dataclass(frozen=True, slots=True)
class ExecutorEvent:
    job_id: str
    attempt: int
    kind: EventKind
    at: int
    exit_code: int | None = None
    detail: str = ""


class Executor(Protocol):
    def launch(self, spec: LaunchSpec) -> None: ...

    def terminate(self, job_id: str, attempt: int, grace: int) -> None: ...

    def poll(self) -> list[ExecutorEvent]: ...

    def alive(self) -> Mapping[str, int]:
        """job_id → attempt for every attempt this executor believes is still running."""
        ...
