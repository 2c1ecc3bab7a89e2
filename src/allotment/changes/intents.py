"""Executor intents as stored payloads: the one place they are encoded and decoded.

Owns: turning a typed intent (a launch with its LaunchSpec, a terminate with its grace) into the kind and JSON
payload an outbox row keeps, and such a row back into the port's Intent.

Must not: decide when an intent is made (decisions.py does) or read and write rows (the store does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from allotment.changes.records import IntentChange, LaunchIntent
from allotment.core.model import Allocation
from allotment.ports.executor import ArrayPosition, LaunchSpec
from allotment.ports.store import Intent, IntentKind


def encode(intent: IntentChange) -> tuple[IntentKind, str, int, str, dict[str, Any]]:
    """(kind, job id, attempt, run id, payload) of an intent, as the outbox keeps it."""
    if isinstance(intent, LaunchIntent):
        s = intent.spec
        payload = {
            "job_id": s.job_id,
            "attempt": s.attempt,
            "command": list(s.command),
            "placement": [{"node": a.node, "gpus": list(a.gpus)} for a in s.placement],
            "budget": s.budget,
            "user": s.user,
            "kind": s.kind,
            "grace": s.grace,
            "slice_end": s.slice_end,
            "env": dict(s.env),
            "workdir": s.workdir,
            "image": s.image,
            "cpus": s.cpus,
            "memory": s.memory,
        }
        if s.array is not None:
            payload["array"] = s.array.as_json()
        return IntentKind.LAUNCH, s.job_id, s.attempt, intent.run_id, payload
    return IntentKind.TERMINATE, intent.job_id, intent.attempt, intent.run_id, {"grace": intent.grace}


def decode(row_id: int, kind: str, job_id: str, attempt: int, payload: Mapping[str, Any]) -> Intent:
    """The port's Intent of an outbox row."""
    k = IntentKind(kind)
    if k is IntentKind.TERMINATE:
        return Intent(row_id, k, job_id, attempt, None, int(payload.get("grace", 0)))
    p = payload
    spec = LaunchSpec(
        job_id=p["job_id"],
        attempt=int(p["attempt"]),
        command=tuple(p["command"]),
        placement=tuple(Allocation(a["node"], tuple(a["gpus"])) for a in p["placement"]),
        budget=p["budget"],
        user=p["user"],
        kind=p["kind"],
        grace=int(p["grace"]),
        slice_end=p["slice_end"],
        env=dict(p.get("env") or {}),
        workdir=p.get("workdir"),
        image=p.get("image"),
        cpus=int(p.get("cpus") or 0),
        memory=int(p.get("memory") or 0),
        array=ArrayPosition.of(p.get("array")),
    )
    return Intent(row_id, k, job_id, attempt, spec, spec.grace)
