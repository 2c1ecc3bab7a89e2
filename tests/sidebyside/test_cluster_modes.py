"""scripts/slurm-cluster's two modes through the test lease: `start` refuses to change the mode of a running
cluster; a lease asking for accounting mode restarts a plain cluster with slurmdbd, Fair Tree and the QOS set;
and when the lease ends, the cluster it found is running again in plain mode.

Runs on a one-node cluster of its own (ALLOT_SLURM_DIR=/tmp/allot-slurm-modes, port 17300), so it never restarts
a cluster other tests use.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.slurm_cluster import leased_cluster, run_script, unavailable

MODES_DIR = Path(os.environ.get("ALLOT_SLURM_MODES_DIR", "/tmp/allot-slurm-modes"))
ENV = {"ALLOT_SLURM_DIR": str(MODES_DIR), "ALLOT_SLURM_PORT": os.environ.get("ALLOT_SLURM_MODES_PORT", "17300")}


def slurm(conf: str, *argv: str) -> str:
    env = {**os.environ, "SLURM_CONF": conf}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_lease_switches_modes_and_leaves_the_old_mode_running() -> None:
    if os.geteuid() != 0:
        unavailable("starting it needs root")
    plain = run_script(ENV, "start", "--nodes", "1")
    if plain.returncode != 0:
        unavailable(f"scripts/slurm-cluster start failed:\n{plain.stderr[-3000:]}")
    conf = plain.stdout.strip().splitlines()[-1]
    try:
        refused = run_script(ENV, "start", "--nodes", "1", "--mode", "accounting")
        assert refused.returncode != 0 and "stop it first to change --mode" in refused.stderr
        with leased_cluster(MODES_DIR, ENV, "--nodes", "1", mode="accounting") as leased:
            assert leased == conf
            config = slurm(conf, "scontrol", "show", "config")
            assert "priority/multifactor" in config and "accounting_storage/slurmdbd" in config
            qos = slurm(conf, "sacctmgr", "-n", "-P", "show", "qos", "format=name,preempt")
            assert {"normal|opportunistic", "opportunistic|", "interactive|opportunistic"} <= set(qos.split())
            assert "mode=accounting" in run_script(ENV, "status").stdout
        status = run_script(ENV, "status")
        assert status.returncode == 0 and "mode=plain" in status.stdout
        assert "priority/basic" in slurm(conf, "scontrol", "show", "config")
        assert not (MODES_DIR / "test-restore-mode").exists()
    finally:
        run_script(ENV, "stop")
