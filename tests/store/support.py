"""Shared values and helpers of the store tests: a fixed epoch, GPU rates and a small organisation."""

from __future__ import annotations

from sqlalchemy.orm import Session

from allotment.core.model import Budget, Cluster, Node, RunClass
from allotment.ledger import Cadence, PeriodSpec, run_rate
from allotment.store.fleet import seed_from
from allotment.store.metering import new_run
from allotment.store.tables import JobRow

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z, a Thursday
WEEKLY = PeriodSpec(Cadence.WEEKLY, T0)
H100 = 1_000_000
B200 = 1_600_000
RATES = {"h100": H100, "b200": B200}


def seed_org(session: Session, now: int = T0) -> None:
    """org → {vision → {detect, segment}, language → {chat}}; allocations in whole credits."""
    seed_from(
        session,
        now=now,
        clusters=[Cluster("c1", ("rack",))],
        nodes=[
            Node("n1", "c1", "h100", 8, (("rack", "r1"),)),
            Node("n2", "c1", "b200", 8, (("rack", "r2"),)),
        ],
        budgets=[
            Budget("org", None, 10_000 * H100),
            Budget("vision", "org", 6_000 * H100),
            Budget("language", "org", 4_000 * H100),
            Budget("detect", "vision", 3_000 * H100),
            Budget("segment", "vision", 2_000 * H100),
            Budget("chat", "language", 4_000 * H100),
        ],
        members=[("detect", "ada", "member"), ("segment", "ada", "lead"), ("chat", "bob", "member")],
        admins=["root"],
    )


def add_job(session: Session, job_id: str, budget: str = "detect", user: str = "ada") -> JobRow:
    job = JobRow(
        id=job_id,
        budget=budget,
        user=user,
        name=job_id,
        spec={"command": ["python", "train.py"], "env": {}, "image": None, "workdir": None},
        gpus=8,
        replicas=1,
        kind="batch",
        contract="guaranteed",
        slice_seconds=3600,
        priority=0,
        grace=60,
        max_runtime=None,
        gpu_types=[],
        clusters=[],
        fallback_opportunistic=False,
        requeue=True,
        submitted_at=T0,
        state="running",
        attempt=0,
        state_reason="",
        updated_at=T0,
    )
    session.add(job)
    session.flush()
    return job


def start(session: Session, job_id: str, at: int, gpus: int = 8, budget: str = "detect") -> str:
    add_job(session, job_id, budget)
    rate = run_rate([("h100", gpus)], RATES)
    row = new_run(
        session,
        job_id=job_id,
        attempt=0,
        started_at=at,
        placement=[{"node": "n1", "gpus": list(range(gpus))}],
        run_class=RunClass.GUARANTEED,
        slice_end=at + 3600,
        rate=rate,
        price=1000,
    )
    return row.id
