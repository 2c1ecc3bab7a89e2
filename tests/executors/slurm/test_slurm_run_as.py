"""Owner mode on the real local Slurm cluster (issue 22): the executor submits each job with `sbatch --uid/--gid`
of its owner's Unix account, so Slurm runs it as that account (`id -un` inside the job is its owner) with its
groups and home; the job's output file and working directory are its owner's alone, and the batch script holding
the job's env secrets stays the server's; its checkpoint file is its owner's, so the job can report checkpoints.
A job whose owner has no account is never submitted."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from allotment.executors.accounts import Account, Mode, RunAs
from allotment.executors.slurm import SlurmExecutor
from allotment.ports.executor import EventKind
from tests.accounts import open_root, unix_accounts

from .helpers import ended, final, spec, wait_for

SECRET = "hunter2-of-ada"


@dataclass
class Owners:
    executor: SlurmExecutor
    jobs: Path
    ada: Account


@pytest.fixture
def owners(slurm_conf: str, tmp_path: Path) -> Iterator[Owners]:
    with unix_accounts(1, shared_group=True) as [ada], open_root() as root:
        mode = RunAs(Mode.OWNER, {"ada": ada.name})
        ex = SlurmExecutor(tmp_path / "state", slurm_conf, run_as=mode, output_dir=root / "jobs")
        try:
            yield Owners(ex, root / "jobs", ada)
        finally:
            for rec in ex.store.open_records():
                if rec.slurm_id is not None:
                    ex.cli.scancel(str(rec.slurm_id))
            ex.close()


def test_a_slurm_job_runs_as_its_owner(owners: Owners) -> None:
    ex, ada = owners.executor, owners.ada
    command = ["/bin/sh", "-c", 'id -un; id -G; echo "$HOME:$USER"; pwd']
    ex.launch(spec("who-1", command, nodes=["gpu01"], gpus=0, env={"API_KEY": SECRET}))
    events = wait_for(ex, ended("who-1"))
    out = ex.output_path("who-1", 0)
    assert final(events, "who-1").exit_code == 0, out.read_text()
    name, groups, home, cwd = out.read_text().splitlines()[:4]
    assert name == ada.name
    assert {int(g) for g in groups.split()} == set(ada.groups) and len(ada.groups) == 2
    assert home == f"{ada.home}:{ada.name}"
    assert cwd == str(owners.jobs / ada.name)

    st = out.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, ada.uid)
    mine = (owners.jobs / ada.name).stat()
    assert (stat.S_IMODE(mine.st_mode), mine.st_uid) == (0o700, ada.uid)
    assert stat.S_IMODE(owners.jobs.stat().st_mode) == 0o711
    [script] = (ex.state_dir / "scripts").iterdir()
    assert SECRET in script.read_text()
    assert (stat.S_IMODE(script.stat().st_mode), script.stat().st_uid) == (0o700, os.geteuid())
    assert stat.S_IMODE((ex.state_dir / "scripts").stat().st_mode) == 0o700


def test_a_job_whose_owner_has_no_account_is_not_submitted(owners: Owners) -> None:
    ex = owners.executor
    ghost = spec("ghost-1", ["true"], nodes=["gpu01"], gpus=0)
    ex.launch(ghost.__class__(**{**{f: getattr(ghost, f) for f in ghost.__slots__}, "user": "ghost-user-x"}))
    events = wait_for(ex, ended("ghost-1"))
    end = final(events, "ghost-1")
    assert (end.kind, end.exit_code) == (EventKind.EXITED, 127)
    assert "no Unix account" in end.detail
    assert ex.slurm_job_id("ghost-1", 0) is None


def test_a_jobs_checkpoint_file_is_its_owners(owners: Owners) -> None:
    ex, ada = owners.executor, owners.ada
    ex.launch(spec("ck-own", ["/bin/sh", "-c", 'touch "$ALLOT_CHECKPOINT_FILE"; sleep 60'], nodes=["gpu01"], gpus=0))
    events = wait_for(ex, lambda evs: any(e.kind is EventKind.CHECKPOINTED for e in evs))
    assert [e.job_id for e in events if e.kind is EventKind.CHECKPOINTED] == ["ck-own"]
    [rec] = ex.store.open_records()
    st = ex.checkpoint_path(rec.name).stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, ada.uid)
    ex.terminate("ck-own", 0, grace=1)
    wait_for(ex, ended("ck-own"))
