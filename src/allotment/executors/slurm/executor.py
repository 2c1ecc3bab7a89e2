"""The Slurm executor: Allotment decides, Slurm runs.

Owns: making launch, terminate and requeue decisions real on a Slurm cluster and reporting what happened:
- run-as: in owner mode every job is submitted as its owner's Unix account (`sbatch --uid/--gid` from a privileged
  server), so Slurm runs it as that account; its output file and working directory are the account's;
- launch: a held batch job (`sbatch --hold`), pinned to exactly the placement's nodes (`scontrol update
  NodeList=`), then released (`scontrol release`); idempotent per (job_id, attempt) through the durable map in
  state.py, including a crash between sbatch and recording its answer (the job is found again by its name);
- terminate: `scancel --signal=TERM` now, SIGKILL to the job's steps once the grace has passed (a durable deadline
  that poll() enforces), `scancel` if the job still lives after that;
- requeue: the next attempt in the same Slurm job (`scontrol requeuehold`, re-pin with StartTime=now, pause,
  release);
- poll/alive: squeue's JSON records turned into STARTED, EXITED(code) and LOST events, each emitted once, and the
  checkpoint file each Slurm job touches when it has saved one (ALLOT_CHECKPOINT_FILE, beside its output file) into
  CHECKPOINTED events.
Must not: choose nodes, GPUs, times or victims; it never lets Slurm restart a job on its own (a job Slurm requeued
after a node failure is reported LOST and cancelled, and the engine decides what runs next).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from allotment.core.model import Allocation
from allotment.executors.accounts import NoAccount, RunAs, identity_environment, passable_dir, private_dir
from allotment.executors.environment import job_command
from allotment.executors.slurm import fleet
from allotment.executors.slurm.cli import SlurmCli, SlurmError, epoch, exit_code, expand_hostlist, gpu_indices
from allotment.executors.slurm.cli import job_state as state_of
from allotment.executors.slurm.script import SLICE_COMMENT, batch_script, job_name, sbatch_args
from allotment.executors.slurm.state import HELD, REFUSED, RELEASED, SUBMITTING, AttemptRecord, AttemptStore
from allotment.ports.clock import Clock
from allotment.ports.executor import EventKind, ExecutorEvent, LaunchSpec
from allotment.ports.fleet import DiscoveredNode, NodeAction

log = logging.getLogger("allotment.slurm")

FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "PREEMPTED"}
    | {"NODE_FAIL", "BOOT_FAIL"}
)
LOST_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"})
"""Final states in which the job did not end by itself: the node failed, or Slurm (not Allotment) preempted it."""
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STAGE_OUT", "SIGNALING"})
HARD_CANCEL_AFTER = 10
"""Seconds after the SIGKILL to the steps before the whole job is cancelled if it still runs."""
NOT_STARTED = 127
"""Exit code of an attempt that could not start (the shells' "command not found", as the local executor)."""
REQUEUE_PAUSE = 1.5
"""Seconds between requeuehold and release: a restart on the same nodes within the same second fails with
"Job credential revoked"."""


CHECKPOINT_SUFFIX = ".checkpoint"
"""The checkpoint file of a Slurm job is its output file's name with this suffix instead of `.out`: one file for all
its runs (a requeued run touches the same file; the engine ignores a report older than the run it is about)."""


class _SystemClock:
    def now(self) -> int:
        return int(time.time())

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)


class SlurmExecutor:
    """An Executor (allotment.ports.executor) that runs each attempt as one Slurm batch job, and the FleetSource
    (allotment.ports.fleet) of the Slurm cluster's nodes."""

    manager_name = "slurm"
    """The FleetSource's name in node reasons."""

    def __init__(
        self,
        state_dir: Path | str,
        slurm_conf: str | None = None,
        *,
        clock: Clock | None = None,
        output_dir: Path | str | None = None,
        partition: str | None = None,
        sbatch_extra: Sequence[str] = (),
        cluster: str = "slurm",
        gpu_type: str = "gpu",
        run_as: RunAs | None = None,
    ) -> None:
        """`run_as` (default single-user): in owner mode each job is submitted with `--uid/--gid` of its owner's
        account (the server must be root or Slurm's SlurmUser), runs in `<output_dir>/<account>/` (0700, the
        account's), and its output file is created as the account's (0600) in `output_dir`, which must then be
        reachable from the compute nodes and is made 0711 (passable, not listable)."""
        self.state_dir = Path(state_dir)
        self.output_dir = Path(output_dir) if output_dir is not None else self.state_dir / "out"
        self.run_as = run_as if run_as is not None else RunAs()
        if self.run_as.owner and output_dir is None:
            raise ValueError("owner mode needs an output_dir the jobs' accounts can reach (outside the state dir)")
        self.cli = SlurmCli(conf=slurm_conf)
        self.clock: Clock = clock or _SystemClock()
        self.partition = partition
        self.sbatch_extra = tuple(sbatch_extra)
        self.cluster = cluster
        self.gpu_type = gpu_type
        if not self.state_dir.exists():
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.state_dir / "scripts").mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.run_as.owner:
            passable_dir(self.output_dir)
        else:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        self.store = AttemptStore(self.state_dir / "slurm-executor.sqlite3")
        self._checkpoints: dict[tuple[str, int], int] = {}
        """The last checkpoint time reported for each running attempt (a restarted executor may report the last one
        again: the engine ignores a report no later than the last)."""

    def close(self) -> None:
        self.store.close()

    # -- paths and lookups ------------------------------------------------------------------------------------

    def output_path(self, job_id: str, attempt: int) -> Path:
        """Where the attempt's stdout and stderr go (every node's tasks append to it; a requeued run appends
        to its first run's file)."""
        rec = self.store.get(job_id, attempt)
        if rec is None:
            raise LookupError(f"no attempt {attempt} of job {job_id!r}")
        return self.output_dir / f"{rec.name}.out"

    def checkpoint_path(self, name: str) -> Path:
        """The file the Slurm job named `name` touches each time it has saved a checkpoint ($ALLOT_CHECKPOINT_FILE)."""
        return self.output_dir / f"{name}{CHECKPOINT_SUFFIX}"

    def slurm_job_id(self, job_id: str, attempt: int) -> int | None:
        rec = self.store.get(job_id, attempt)
        return None if rec is None else rec.slurm_id

    def placement(self, job_id: str, attempt: int) -> tuple[Allocation, ...] | None:
        """The GPUs Slurm gave the attempt, node by node (known once it started)."""
        rec = self.store.get(job_id, attempt)
        if rec is None or rec.gpus is None:
            return None
        return tuple(Allocation(node=n, gpus=ix) for n, ix in rec.gpus)

    # -- Executor -------------------------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> None:
        spec = replace(spec, command=job_command(spec))
        rec = self.store.get(spec.job_id, spec.attempt)
        if rec is not None and rec.phase in (RELEASED, REFUSED):
            return
        if rec is None:
            # Unique across executors and state directories: slurmctld remembers ended jobs for a while.
            name = f"{job_name(spec.job_id, spec.attempt)}.{secrets.token_hex(4)}"
            script = batch_script(spec, str(self.checkpoint_path(name)))  # validates before anything is recorded
            try:
                self.run_as.require(spec.user)
            except NoAccount as exc:
                log.warning("job %s attempt %d not submitted: %s", spec.job_id, spec.attempt, exc.message)
                refused = True
            else:
                refused = False
            rec = AttemptRecord(
                job_id=spec.job_id,
                attempt=spec.attempt,
                slurm_id=None,
                base_attempt=spec.attempt,
                name=name,
                nodes=tuple(a.node for a in spec.placement),
                phase=REFUSED if refused else SUBMITTING,
                gpus=None,
                started=False,
                ended=False,
                term_at=None,
                kill_at=None,
                kill_sent_at=None,
                submitted_at=self.clock.now(),
            )
            self.store.put(rec)
            if refused:
                return
            # A fresh record's name is new: nothing can have been submitted under it, so the job is submitted
            # pinned (--nodelist, exactly the placement's nodes) and held, then released — two commands.
            self._submit_fresh(rec, spec, script)
            return
        script = batch_script(spec, str(self.checkpoint_path(rec.name)))
        if rec.slurm_id is None:
            rec = self._submit(rec, spec, script)
        self._pin_and_release(rec)

    def terminate(self, job_id: str, attempt: int, grace: int) -> None:
        rec = self.store.get(job_id, attempt)
        if rec is None or rec.ended or rec.term_at is not None:
            return
        now = self.clock.now()
        if rec.slurm_id is None:
            self._end(rec, term_at=now, kill_at=now)
            return
        state = self.cli.run(["squeue", "-h", "-j", str(rec.slurm_id), "-o", "%T"], check=False).strip()
        if state in ("", "PENDING"):
            # Never ran (or already gone): nothing to give notice to.
            self.cli.scancel(str(rec.slurm_id))
            self.store.update(rec, term_at=now, kill_at=now, kill_sent_at=now)
            return
        self.cli.scancel("--signal=TERM", str(rec.slurm_id))
        rec = self.store.update(rec, term_at=now, kill_at=now + max(0, grace))
        if grace <= 0:
            self._kill(rec, now)

    def poll(self) -> list[ExecutorEvent]:
        records = self.store.open_records()
        if not records:
            return []
        jobs = self.cli.jobs()
        now = self.clock.now()
        events: list[ExecutorEvent] = []
        for rec in records:
            if rec.phase == REFUSED:
                detail = "not started: its owner has no Unix account to run it as (owner mode; see the server log)"
                events.append(self._event(rec, EventKind.EXITED, now, NOT_STARTED, detail))
                self._end(rec)
                continue
            if rec.slurm_id is None:
                continue  # launch() has not finished; it will
            events.extend(self._observe(rec, jobs.get(rec.slurm_id), now))
        return events

    def alive(self) -> Mapping[str, int]:
        records = [r for r in self.store.open_records() if r.slurm_id is not None]
        if not records:
            return {}
        jobs = self.cli.jobs()
        out: dict[str, int] = {}
        for rec in records:
            job = jobs.get(rec.slurm_id) if rec.slurm_id is not None else None
            if job is None:
                continue
            state = state_of(job)
            if state in FINAL_STATES or _restarts(job) != rec.expected_restarts:
                continue
            if state in RUNNING_STATES or (state == "PENDING" and rec.phase == RELEASED):
                out[rec.job_id] = rec.attempt
        return out

    # -- requeue (optional for the engine) --------------------------------------------------------------------

    def requeue(self, job_id: str, attempt: int, placement: Sequence[Allocation], slice_end: int | None = None) -> None:
        """Run `attempt` as the next run of the previous attempt's Slurm job, on `placement`.

        The previous attempt (attempt - 1) must have ended (poll reported it). Slurm keeps the job id and raises
        SLURM_RESTART_COUNT, so the job sees ALLOT_ATTEMPT = attempt; ALLOT_SLICE_END becomes `slice_end`.
        Idempotent: requeueing an attempt that is already recorded does nothing. The placement must have as many
        nodes, with as many GPUs each, as the first run asked Slurm for.
        """
        existing = self.store.get(job_id, attempt)
        if existing is not None:
            if existing.phase == HELD:  # an earlier call stopped between requeuehold and release
                self._pin_and_release(existing, start_now=True)
            return
        prev = self.store.get(job_id, attempt - 1)
        if prev is None or prev.slurm_id is None:
            raise ValueError(f"job {job_id!r}: no attempt {attempt - 1} to requeue")
        if not prev.ended:
            raise ValueError(f"job {job_id!r}: attempt {attempt - 1} still runs; terminate it and poll first")
        nodes = tuple(a.node for a in placement)
        if len(nodes) != len(prev.nodes) or len(set(nodes)) != len(nodes):
            raise ValueError(f"job {job_id!r}: a requeue needs {len(prev.nodes)} distinct nodes, got {nodes}")
        rec = AttemptRecord(
            job_id=job_id,
            attempt=attempt,
            slurm_id=prev.slurm_id,
            base_attempt=prev.base_attempt,
            name=prev.name,
            nodes=nodes,
            phase=HELD,
            gpus=None,
            started=False,
            ended=False,
            term_at=None,
            kill_at=None,
            kill_sent_at=None,
            submitted_at=self.clock.now(),
        )
        job = self.cli.jobs().get(prev.slurm_id)
        if job is None:
            raise ValueError(f"job {job_id!r}: Slurm forgot job {prev.slurm_id}; launch attempt {attempt} instead")
        if rec.expected_restarts != _restarts(job) + 1:
            raise ValueError(f"job {job_id!r}: Slurm job {prev.slurm_id} cannot run attempt {attempt}")
        self.cli.scontrol("requeuehold", str(prev.slurm_id))
        self.store.put(rec)
        comment = f"Comment={SLICE_COMMENT}{'' if slice_end is None else slice_end}"
        self.cli.scontrol("update", f"JobId={prev.slurm_id}", comment)
        self.clock.wait(REQUEUE_PAUSE)
        self._pin_and_release(rec, start_now=True)

    # -- fleet -------------------------------------------------------------------------------------------------

    def discover_nodes(self) -> list[DiscoveredNode]:
        return fleet.discover_nodes(self.cli, cluster=self.cluster, gpu_type=self.gpu_type)

    def set_node_state(self, node: str, state: NodeAction, reason: str = "allotment") -> None:
        fleet.set_node_state(self.cli, node, state, reason)

    # -- internals ----------------------------------------------------------------------------------------------

    def _sbatch(self, rec: AttemptRecord, spec: LaunchSpec, script: str, *extra: str) -> int:
        """Write the script (the server's, 0700: it holds the job's env), prepare the output file and submit."""
        path = self.state_dir / "scripts" / f"{rec.name}.sh"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
        with os.fdopen(fd, "w") as f:
            f.write(script)
        path.chmod(0o700)
        output = self.output_dir / f"{rec.name}.out"
        output.unlink(missing_ok=True)
        account = self.run_as.account(spec.user)
        # The job touches its checkpoint file; it exists beforehand (the account's own in owner mode: the job cannot
        # create files in the output directory), dated 1970 so that only a touch counts as a report.
        marker = self.checkpoint_path(rec.name)
        marker.unlink(missing_ok=True)
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.utime(fd, (0, 0))
            if account is not None:
                os.fchown(fd, account.uid, account.gid)
        finally:
            os.close(fd)
        workdir: str | None = None
        identity: dict[str, str] | None = None
        if account is not None:
            # Slurm opens the output as the job's account: it is created as that account's alone beforehand, in a
            # directory no account can list; the job runs in its account's own directory.
            fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            os.fchown(fd, account.uid, account.gid)
            os.close(fd)
            workdir = str(private_dir(self.output_dir / account.name, account))
            identity = identity_environment(account)
        args = sbatch_args(spec, rec.name, str(output), self.partition, self.sbatch_extra, account, workdir)
        return self.cli.sbatch([*args, *extra], str(path), identity)

    def _submit(self, rec: AttemptRecord, spec: LaunchSpec, script: str) -> AttemptRecord:
        found = self._find_by_name(rec.name)
        if found is not None:
            return self.store.update(rec, slurm_id=found, phase=HELD)
        slurm_id = self._sbatch(rec, spec, script)
        return self.store.update(rec, slurm_id=slurm_id, phase=HELD)

    def _submit_fresh(self, rec: AttemptRecord, spec: LaunchSpec, script: str) -> None:
        """Submit held and pinned, release, record once. A crash before the record is written leaves the record
        in SUBMITTING: the next launch() finds the job by its name and pins and releases it if still held."""
        slurm_id = self._sbatch(rec, spec, script, f"--nodelist={','.join(rec.nodes)}")
        try:
            self.cli.scontrol("release", str(slurm_id))
        except SlurmError:
            self.cli.scancel(str(slurm_id))  # nothing ran: withdraw it so a retry starts clean
            self.store.delete(rec.job_id, rec.attempt)
            raise
        self.store.update(rec, slurm_id=slurm_id, phase=RELEASED)

    def _find_by_name(self, name: str) -> int | None:
        """A job a crashed launch submitted but did not record (names are unique per attempt)."""
        out = self.cli.run(["squeue", "-h", "-t", "all", "-n", name, "-o", "%i"], check=False)
        ids = [int(x) for x in out.split() if x.isdigit()]
        return max(ids) if ids else None

    def _held(self, slurm_id: int) -> bool:
        """Whether the job still waits, held, for its pin and release (a re-sent launch may find it released)."""
        out = self.cli.run(["squeue", "-h", "-t", "all", "-j", str(slurm_id), "-o", "%T %Q"], check=False)
        state, _, priority = out.strip().partition(" ")
        return state == "PENDING" and priority.strip() == "0"  # Slurm holds a job by zeroing its priority

    def _pin_and_release(self, rec: AttemptRecord, start_now: bool = False) -> None:
        assert rec.slurm_id is not None
        sid = str(rec.slurm_id)
        if not self._held(rec.slurm_id):
            self.store.update(rec, phase=RELEASED)  # released before a crash; pinning now would fail
            return
        update = ["update", f"JobId={sid}", f"NodeList={','.join(rec.nodes)}"]
        if start_now:
            update.append("StartTime=now")  # a requeued job is otherwise eligible only ~121 s later
        try:
            self.cli.scontrol(*update)
        except SlurmError:
            if rec.phase == HELD and rec.attempt == rec.base_attempt:
                # Nothing ran: withdraw the held job so a retry starts clean, and report the cause.
                self.cli.scancel(sid)
                self.store.delete(rec.job_id, rec.attempt)
            raise
        self.cli.scontrol("release", sid)
        self.store.update(rec, phase=RELEASED)

    def _kill(self, rec: AttemptRecord, now: int) -> None:
        """SIGKILL every step of the job now (a job-level SIGKILL would wait KillWait first)."""
        assert rec.slurm_id is not None
        steps = [s for s in self.cli.steps(rec.slurm_id) if not s.endswith((".batch", ".extern"))]
        for step in steps:
            self.cli.scancel("--signal=KILL", step)
        if not steps:
            self.cli.scancel(str(rec.slurm_id))
        self.store.update(rec, kill_sent_at=now)

    def _observe(self, rec: AttemptRecord, job: Mapping[str, Any] | None, now: int) -> list[ExecutorEvent]:
        events: list[ExecutorEvent] = []
        if job is None:
            detail = f"Slurm job {rec.slurm_id} is gone without an exit code"
            if rec.term_at is not None and not rec.started:
                events.append(self._event(rec, EventKind.EXITED, now, None, "cancelled before it started"))
            else:
                events.append(self._event(rec, EventKind.LOST, now, None, detail))
            self._end(rec)
            return events
        state = state_of(job)
        restarts = _restarts(job)
        if restarts > rec.expected_restarts:
            # Slurm requeued the job by itself (a node went down): this attempt is lost; the engine decides
            # what runs next, so the Slurm job must not start again on its own.
            self.cli.scancel(str(rec.slurm_id))
            reason = str(job.get("state_reason") or "requeued by Slurm")
            events.append(self._event(rec, EventKind.LOST, now, None, f"requeued by Slurm ({reason})"))
            self._end(rec)
            return events
        if restarts < rec.expected_restarts:
            return events  # the requeue has not reached slurmctld's record yet
        ran = bool(job.get("nodes")) and (state in RUNNING_STATES or state in FINAL_STATES)
        if ran and not rec.started and (state in RUNNING_STATES or epoch(job.get("start_time"))):
            gpus = _gpus(job)
            rec = self.store.update(rec, started=True, gpus=gpus)
            at = epoch(job.get("start_time")) or now
            detail = " ".join(f"{n}:{','.join(map(str, ix))}" for n, ix in gpus)
            events.append(self._event(rec, EventKind.STARTED, at, None, detail))
        if state in FINAL_STATES:
            at = epoch(job.get("end_time")) or now
            if state in LOST_STATES:
                events.append(self._event(rec, EventKind.LOST, at, None, f"{state} on {job.get('nodes')}"))
            elif not ran:
                events.append(self._event(rec, EventKind.EXITED, at, None, "cancelled before it started"))
            else:
                events.append(self._event(rec, EventKind.EXITED, at, exit_code(job.get("exit_code")), state))
            self._end(rec)
            return events
        if rec.started and state in RUNNING_STATES:
            events.extend(self._checkpoint_events(rec, epoch(job.get("start_time")) or 0))
        if rec.kill_at is not None and now >= rec.kill_at and state in RUNNING_STATES:
            if rec.kill_sent_at is None:
                self._kill(rec, now)
            elif now >= rec.kill_sent_at + HARD_CANCEL_AFTER:
                self.cli.scancel(str(rec.slurm_id))
        return events

    def _end(self, rec: AttemptRecord, **changes: object) -> None:
        """Record that this attempt is over, and forget the checkpoint time it last reported."""
        self.store.update(rec, ended=True, **changes)
        self._checkpoints.pop((rec.job_id, rec.attempt), None)

    def _checkpoint_events(self, rec: AttemptRecord, started_at: int) -> list[ExecutorEvent]:
        """A CHECKPOINTED event when the job touched its checkpoint file since the last poll, at the file's
        modification time; a time before this run started is an earlier run's checkpoint, not this attempt's."""
        try:
            at = int(self.checkpoint_path(rec.name).stat().st_mtime)
        except OSError:
            return []
        key = (rec.job_id, rec.attempt)
        if at < started_at or at <= self._checkpoints.get(key, 0):
            return []
        self._checkpoints[key] = at
        return [self._event(rec, EventKind.CHECKPOINTED, at, None, "checkpoint file touched")]

    def _event(self, rec: AttemptRecord, kind: EventKind, at: int, code: int | None, detail: str) -> ExecutorEvent:
        return ExecutorEvent(job_id=rec.job_id, attempt=rec.attempt, kind=kind, at=at, exit_code=code, detail=detail)


def _restarts(job: Mapping[str, Any]) -> int:
    raw = job.get("restart_cnt", 0)
    if isinstance(raw, Mapping):
        raw = raw.get("number", 0)
    return raw if isinstance(raw, int) else 0


def _gpus(job: Mapping[str, Any]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(node, GPU indices) from squeue's `nodes` and `gres_detail` (one detail per node, in host-list order)."""
    nodes = expand_hostlist(str(job.get("nodes") or ""))
    details = job.get("gres_detail") or []
    out: list[tuple[str, tuple[int, ...]]] = []
    for i, node in enumerate(nodes):
        detail = details[i] if isinstance(details, list) and i < len(details) else ""
        out.append((node, gpu_indices(str(detail))))
    return tuple(out)
