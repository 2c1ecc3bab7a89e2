"""Session-wide checks: a test run fails when a test left a process behind (tests/leftovers.py says what counts).

At the end of each pytest process (the xdist controller and every worker), after every fixture has been torn down:
processes still running that descend from it or run in its temporary directory, and slurmstepds of Slurm jobs that
no longer exist in a cluster it leased, are listed, ended with SIGKILL, and turn the run's exit status into a
failure. ALLOT_ALLOW_LEFTOVERS=1 reports them without failing (for debugging a run).

Also fixes the terminal width the CLI's Rich console sees (COLUMNS=200) before anything imports it: the console is
built once per process, at import, so without this its width depended on which test imported it first, and CLI
output wrapped differently under xdist.
"""

from __future__ import annotations

import os

os.environ["COLUMNS"] = "200"

import pytest

from tests import leftovers
from tests.slurm_cluster import LEASED_CONFS


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    tmp_root = factory.getbasetemp() if factory is not None else None
    found = leftovers.settle(tmp_root, sorted(LEASED_CONFS))
    if not found:
        return
    leftovers.end(found)
    lines = "\n".join(f"  {leftover}" for leftover in found)
    message = f"tests left {len(found)} process(es) running (now killed):\n{lines}"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "processes left behind", red=True)
        reporter.write_line(message)
    else:
        print(message)
    if os.environ.get("ALLOT_ALLOW_LEFTOVERS") != "1" and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
