"""Small fluent builders of simulation results and jobs for the simulator's tests."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from allotment.core.model import ContractClass, JobKind
from allotment.sim.results import DrainRecord, JobRecord, RunRecord, SimResult
from allotment.sim.workload import SimJob


@dataclass
class ResultBuilder:
    """A SimResult built job by job: `.job(...)` adds a job and, with `runs`, its runs as (start, end) pairs."""

    fleet: int = 8
    duration: int = 10 * 3600
    allocations: dict[str, int] = field(default_factory=dict)
    jobs: list[JobRecord] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    drains: list[DrainRecord] = field(default_factory=list)
    balances: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    group_limits: dict[str, tuple[tuple[str, ...], int]] = field(default_factory=dict)

    def group(self, name: str, leaves: tuple[str, ...], max_gpus: int) -> ResultBuilder:
        """A budget above `leaves` whose GPU limit they share."""
        self.group_limits[name] = (leaves, max_gpus)
        return self

    def budget(self, name: str, credits: int, max_gpus: int | None = None) -> ResultBuilder:
        self.allocations[name] = credits * 1_000_000
        if max_gpus is not None:
            self.limits[name] = max_gpus
        return self

    def job(
        self,
        job_id: str,
        *,
        budget: str = "a",
        gpus: int = 8,
        submit: int = 0,
        runs: tuple[tuple[int, int | None], ...] = (),
        cls: str = "batch",
        preempted: tuple[str | None, ...] = (),
        lost: tuple[int, ...] = (),
        node: str = "n0",
        contract: str = "guaranteed",
    ) -> ResultBuilder:
        for i, (start, end) in enumerate(runs):
            reason = preempted[i] if i < len(preempted) else None
            self.runs.append(
                RunRecord(job_id, i, start, end, gpus, (node,), "guaranteed", reason, lost[i] if i < len(lost) else 0)
            )
        finished = bool(runs) and runs[-1][1] is not None
        self.jobs.append(
            JobRecord(
                job_id,
                budget,
                "u",
                cls,
                gpus,
                submit,
                runs[0][0] if runs else None,
                runs[-1][1] if finished else None,
                "completed" if finished else ("running" if runs else "pending"),
                3600,
                contract=contract,
            )
        )
        return self

    def drain(self, node: str, at: int, hard: bool = False) -> ResultBuilder:
        self.drains.append(DrainRecord(node, at, hard))
        return self

    def balance(self, key: str, credits: float) -> ResultBuilder:
        self.balances[key] = int(credits * 1_000_000)
        return self

    def build(self, policy: str = "p") -> SimResult:
        return SimResult(
            name="t",
            policy=policy,
            seed=1,
            duration=self.duration,
            fleet_gpus=self.fleet,
            allocations=dict(self.allocations) or {"a": 1_000_000},
            jobs=tuple(self.jobs),
            runs=tuple(self.runs),
            drains=tuple(self.drains),
            balances=dict(self.balances),
            exhausted={},
            cycles=0,
            events=0,
            wall_seconds=0.0,
            decide_seconds=0.0,
            limits=dict(self.limits),
            group_limits=dict(self.group_limits),
        )


def sim_job(job_id: str, submit: int = 0, **changes: object) -> SimJob:
    """A 8-GPU guaranteed batch job of budget `pretrain` (the small example) needing one hour."""
    base = SimJob(
        id=job_id,
        submit=submit,
        budget="pretrain",
        user="ben",
        gpus=8,
        replicas=1,
        work=3600,
        kind=JobKind.BATCH,
        contract=ContractClass.GUARANTEED,
        slice_seconds=3600,
        checkpoint=600,
    )
    return replace(base, **changes)  # type: ignore[arg-type]
