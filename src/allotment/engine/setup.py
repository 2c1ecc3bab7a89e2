"""Putting an engine together from a configuration: the composition root, the one engine module that names adapters.

Owns: the settings of a running Allotment (configuration file, data directory, database URL, executor kind, clock,
run-as mode) and the steps that turn them into a ready Engine: resolve whose account jobs run as and keep the data
directory the server's alone (0700, database files 0600), migrate the database, seed the fleet and organisation from the
configuration, pick the executor (LocalExecutor, or SlurmExecutor behind a fleet sync on the SQL fleet store), and
build the SQL store with the period calendar. It alone in allotment.engine imports allotment.executors,
allotment.store and sqlalchemy (an import-linter contract, decision 47); everything else in the engine sees ports.

Must not: run the loop (server.py does) or decide anything.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine as SqlEngine
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from allotment.config import AllotmentConfig, load_config, to_core
from allotment.config.limits import MAX_BODY_BYTES
from allotment.core.cycle import AllotmentPolicy
from allotment.core.model import Node
from allotment.core.policy import Policy
from allotment.engine.clock import ScaledClock, SystemClock
from allotment.engine.cycle import Engine
from allotment.executors.accounts import RunAs
from allotment.executors.gpus import GpuDiscoveryError, discover_gpus
from allotment.executors.local import LocalExecutor
from allotment.ledger.periods import Cadence, PeriodSpec, Rollover
from allotment.ports.clock import Clock
from allotment.ports.executor import Executor
from allotment.store.db import make_engine, session_factory
from allotment.store.fleet import seed_from
from allotment.store.fleet_sync_store import SqlFleetSyncStore
from allotment.store.migrate import upgrade
from allotment.store.scheduling import Accounting, SqlSchedulingStore
from allotment.store.tables import NodeRow

log = logging.getLogger("allotment.setup")


def _body_limit_env() -> int:
    raw = os.environ.get("ALLOT_MAX_BODY_BYTES", "").strip()
    return int(raw) if raw else MAX_BODY_BYTES


@dataclass(frozen=True, slots=True)
class Settings:
    config: Path
    data_dir: Path
    database_url: str | None = None
    executor: str = "local"
    clock_factor: float = 1.0
    """Engine seconds per wall second (1: real time)."""
    charge_every: int = 300
    slurm_conf: Path | None = None
    """executor="slurm": the cluster's slurm.conf (default: $SLURM_CONF, else Slurm's compiled-in default)."""
    slurm_partition: str | None = None
    """executor="slurm": the partition jobs are submitted to (default: Slurm's default partition)."""
    slurm_cluster: str | None = None
    """executor="slurm": the configured cluster Slurm runs (default: the configuration's only cluster)."""
    fleet_sync_every: float = 10.0
    """executor="slurm": seconds between node syncs with Slurm (discovery, DOWN/DRAIN both ways)."""
    submit_rate: float = field(default_factory=lambda: _rate_env("SUBMIT", 20.0, 2.0)[0])
    """Submissions (jobs and sessions) per second each user may sustain, over all their tokens (0: no limit).
    Default 20, or $ALLOT_SUBMIT_RATE."""
    submit_burst: int = field(default_factory=lambda: _rate_env("SUBMIT", 20.0, 2.0)[1])
    """Submissions a user may make at once after being idle. Default twice the rate, or $ALLOT_SUBMIT_BURST."""
    token_rate: float = field(default_factory=lambda: _rate_env("TOKEN", 0.5, 20.0)[0])
    """Tokens per second that may be issued for one user (0: no limit). Default 0.5, or $ALLOT_TOKEN_RATE."""
    token_burst: int = field(default_factory=lambda: _rate_env("TOKEN", 0.5, 20.0)[1])
    """Tokens that may be issued for one user at once. Default 10, or $ALLOT_TOKEN_BURST."""
    max_tokens: int = field(default_factory=lambda: int(os.environ.get("ALLOT_MAX_TOKENS", "100")))
    """Live (unexpired, unrevoked) tokens one user may hold. Default 100, or $ALLOT_MAX_TOKENS."""
    allowed_hosts: tuple[str, ...] = field(default_factory=lambda: _names_env("ALLOT_ALLOWED_HOSTS"))
    """Host header values the API answers besides the bound host and the loopback names (the name a TLS proxy
    serves); $ALLOT_ALLOWED_HOSTS, comma-separated. "*" turns the check off (refused with open login)."""
    max_body_bytes: int = field(default_factory=_body_limit_env)
    """Largest request body the API reads (413 beyond). Default 1 MiB (config.limits), or $ALLOT_MAX_BODY_BYTES."""
    run_as: str | None = None
    """Overrides the configuration's run_as.mode: owner, single-user or auto (docs/security.md)."""
    jobs_dir: Path | None = None
    """Owner mode: the root of the jobs' own directories (`<jobs_dir>/<account>/`, each 0700 and owned by its
    account; default: `<data dir>-jobs` beside the data directory, which no job can reach)."""

    @property
    def jobs_root(self) -> Path:
        return self.jobs_dir if self.jobs_dir is not None else self.data_dir.with_name(self.data_dir.name + "-jobs")


def _names_env(variable: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in os.environ.get(variable, "").split(",") if name.strip())


def _rate_env(what: str, default: float, burst_seconds: float) -> tuple[float, int]:
    """$ALLOT_<what>_RATE (default `default`) and $ALLOT_<what>_BURST (default `burst_seconds` of the rate)."""
    rate = float(os.environ.get(f"ALLOT_{what}_RATE", str(default)))
    burst = int(os.environ.get(f"ALLOT_{what}_BURST", str(max(1, int(burst_seconds * rate)))))
    return rate, burst


def period_spec(cfg: AllotmentConfig) -> PeriodSpec:
    cadence = {"week": Cadence.WEEKLY, "month": Cadence.MONTHLY, "quarter": Cadence.QUARTERLY}[cfg.period.length.value]
    return PeriodSpec(cadence, int(cfg.period.start_of(0).timestamp()))


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    env = os.environ.get("ALLOT_DATABASE_URL")
    if env:
        return env
    if not settings.data_dir.exists():
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return f"sqlite:///{settings.data_dir / 'allotment.db'}"


def run_as(settings: Settings, cfg: AllotmentConfig) -> RunAs:
    """Whose account jobs run as: the configuration's run_as (or the settings' override of its mode), resolved
    against this process's privilege. Raises RunAsError when owner mode is asked for without the privilege."""
    mode = settings.run_as if settings.run_as is not None else cfg.run_as.mode.value
    return RunAs.resolve(mode, cfg.run_as.accounts)


DATABASE_FILES = ("allotment.db", "allotment.db-wal", "allotment.db-shm", "allotment.db.leader")


def secure_data_dir(settings: Settings, mode: RunAs) -> None:
    """The data directory is the server's alone: created 0700 (the SQLite files 0600: store.db). In owner mode an
    existing directory and database files that others could reach are tightened to 0700/0600 (and logged), so no
    job, running as its owner, can open the database or the executor's records."""
    if not settings.data_dir.exists():
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not mode.owner:
        return
    for path, private in [(settings.data_dir, 0o700)] + [(settings.data_dir / f, 0o600) for f in DATABASE_FILES]:
        try:
            current = path.lstat().st_mode & 0o777
        except FileNotFoundError:
            continue
        if current & ~private:
            path.chmod(private)
            log.warning("owner mode: tightened %s from %o to %o", path, current, private)


def host_fleet(cfg: AllotmentConfig, nvidia_smi: str = "nvidia-smi") -> tuple[Node, ...] | None:
    """The local executor's fleet when this host has real GPUs: one node named after the host with the GPUs
    nvidia-smi reports, in the configuration's first cluster. None when nvidia-smi is absent or sees no GPU: the
    configuration's (virtual) nodes are used instead, so Allotment runs on a laptop."""
    try:
        gpus = discover_gpus(nvidia_smi)
    except GpuDiscoveryError as exc:
        log.warning("GPU discovery failed (%s); using the configured nodes", exc)
        return None
    if not gpus:
        return None
    core = to_core(cfg)
    gpu_type = gpus[0].gpu_type
    if gpu_type not in core.rates:
        fallback = core.nodes[0].gpu_type if core.nodes else gpu_type
        log.warning("GPU type %s has no credit rate in the configuration; counting it as %s", gpu_type, fallback)
        gpu_type = fallback
    cluster = core.clusters[0].name if core.clusters else "local"
    return (Node(socket.gethostname(), cluster, gpu_type, len(gpus)),)


def seed(
    sessions: sessionmaker[Session], cfg: AllotmentConfig, now: int, nodes: tuple[Node, ...] | None = None
) -> None:
    """Upsert the configuration's fleet, budgets, users, memberships and windows (nothing is deleted). `nodes`
    replaces the configured nodes (a host's discovered GPUs)."""
    core = to_core(cfg)
    members = [(b.name, m.user, m.role.value) for b in cfg.budgets for m in b.members]
    admins = sorted({m.user for b in cfg.budgets for m in b.members if m.role.value == "admin"})
    with sessions.begin() as session:
        fresh = session.scalar(select(NodeRow.name).limit(1)) is None
        seed_from(
            session,
            now=now,
            clusters=core.clusters,
            nodes=(nodes if nodes is not None else core.nodes) if fresh else [],
            budgets=core.budgets,
            members=members,
            users=[u.name for u in cfg.users],
            admins=admins,
            windows=core.windows,
        )


def make_clock(settings: Settings, sessions: sessionmaker[Session]) -> Clock:
    if settings.clock_factor == 1.0:
        return SystemClock()
    from allotment.store.records import get_state, set_state

    with sessions.begin() as session:
        origin = get_state(session, "clock_origin")
        if origin is None:
            origin = {"engine": int(time.time()), "wall": time.time()}
            set_state(session, "clock_origin", origin)
    return ScaledClock(settings.clock_factor, int(origin["engine"]), float(origin["wall"]))


def make_executor(
    settings: Settings, cfg: AllotmentConfig, host: tuple[Node, ...] | None = None, mode: RunAs | None = None
) -> Executor:
    """The executor `settings.executor` names. "local": processes on this host (state in <data dir>/executor),
    one virtual node per configured node. "slurm": a SlurmExecutor (state in <data dir>/slurm-executor) wrapped
    in a fleet sync that discovers the configured cluster's nodes from Slurm and keeps node states in step both
    ways (engine/fleet_sync.py). `mode`: whose account jobs run as (default: resolved from the settings)."""
    mode = mode if mode is not None else run_as(settings, cfg)
    if settings.executor == "local":
        nodes = [n.name for n in (host if host is not None else to_core(cfg).nodes)]
        jobs_dir = settings.jobs_root if mode.owner else None
        return LocalExecutor(settings.data_dir / "executor", nodes, run_as=mode, jobs_dir=jobs_dir)
    if settings.executor == "slurm":
        from allotment.engine.fleet_sync import FleetSync, SyncedExecutor
        from allotment.executors.slurm import SlurmExecutor

        names = [c.name for c in cfg.fleet.clusters]
        cluster = settings.slurm_cluster or (names[0] if len(names) == 1 else None)
        if cluster is None or cluster not in names:
            raise ValueError(f"executor slurm: name the cluster Slurm runs (slurm_cluster), one of {names}")
        [ccfg] = [c for c in cfg.fleet.clusters if c.name == cluster]
        gpu_type = ccfg.node_groups[0].gpu_type
        conf = settings.slurm_conf or os.environ.get("SLURM_CONF")
        slurm = SlurmExecutor(
            settings.data_dir / "slurm-executor",
            str(conf) if conf else None,
            partition=settings.slurm_partition,
            cluster=cluster,
            gpu_type=gpu_type,
            run_as=mode,
            output_dir=settings.jobs_root if mode.owner else None,
        )
        sessions = session_factory(make_engine(database_url(settings)))
        clock = make_clock(settings, sessions)
        sync = FleetSync(SqlFleetSyncStore(sessions), slurm, cluster, gpu_type)
        return SyncedExecutor(slurm, sync, clock, settings.fleet_sync_every)
    raise ValueError(f"unknown executor {settings.executor!r} (choose: local, slurm)")


@dataclass
class Built:
    engine: Engine
    store: SqlSchedulingStore
    sessions: sessionmaker[Session]
    config: AllotmentConfig
    run_as: RunAs = field(default_factory=RunAs)
    """Whose account jobs run as (owner or single-user mode)."""
    store_errors: tuple[type[Exception], ...] = (SQLAlchemyError,)
    """What the store's adapter raises when the database is away: the server retries the loop after a backoff (the
    executor's counterpart is the port's ExecutorUnavailable)."""

    def close(self) -> None:
        """Close the database's pooled connections now. A SQLite connection the garbage collector closes later
        checkpoints the WAL into the file at that moment; a caller done with the database closes it here."""
        bind = self.sessions.kw.get("bind")
        if isinstance(bind, SqlEngine):
            bind.dispose()


def build(
    settings: Settings, executor: Executor | None = None, policy: Policy | None = None, clock: Clock | None = None
) -> Built:
    cfg = load_config(settings.config)
    mode = run_as(settings, cfg)
    secure_data_dir(settings, mode)
    if not mode.owner and os.geteuid() == 0:
        log.warning("run as: %s (root): set run_as.mode owner to run jobs as their owners", mode.describe())
    else:
        log.info("run as: %s", mode.describe())
    db = make_engine(database_url(settings))
    upgrade(db)
    sessions = session_factory(db)
    clock = clock or make_clock(settings, sessions)
    host = host_fleet(cfg) if settings.executor == "local" and executor is None else None
    seed(sessions, cfg, clock.now(), host)
    core = to_core(cfg)
    accounting = Accounting(period_spec(cfg), Rollover(carry_credit=cfg.period.carry_over), settings.charge_every)
    store = SqlSchedulingStore(sessions, core.policy, core.rates, accounting)
    engine = Engine(store, executor or make_executor(settings, cfg, host, mode), clock, policy or AllotmentPolicy())
    return Built(engine, store, sessions, cfg, mode)
