"""Real Unix accounts and reachable directories for the run-as tests (owner mode).

Owns: `unix_accounts`, which creates throw-away accounts with useradd (names `allot-t1-<random>`, …, each with its
own group, and optionally a shared supplementary group) and removes them with userdel -r / groupdel afterwards,
even when the test fails; and `open_root`, a temporary directory under /tmp that every account may pass through
(0711), because pytest's own tmp_path sits under a root-only directory and would hide what the tests must show:
that the server's own modes keep a job out.
Must not: leave an account, a group or a directory behind. Under CI=true a missing privilege (not root, no useradd)
fails the test; locally it is skipped.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from allotment.executors.accounts import Account, lookup


def require_privilege() -> None:
    """Skip (fail under CI=true) unless this process may create Unix accounts and run jobs as them."""
    why = None
    if os.geteuid() != 0:
        why = "the run-as tests create Unix accounts and need root"
    elif shutil.which("useradd") is None or shutil.which("userdel") is None:
        why = "useradd/userdel are not installed"
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required under CI=true: {why}", pytrace=False)
    pytest.skip(why)


def _run(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, timeout=60)


@contextmanager
def unix_accounts(count: int, *, shared_group: bool = False) -> Iterator[list[Account]]:
    """`count` fresh accounts (allot-t1-xxxx, allot-t2-xxxx, …); with `shared_group`, the first one is also a
    member of a supplementary group allot-g-xxxx. All of them are removed afterwards."""
    require_privilege()
    tag = secrets.token_hex(2)
    names = [f"allot-t{i + 1}-{tag}" for i in range(count)]
    group = f"allot-g-{tag}" if shared_group else None
    created: list[str] = []
    try:
        if group is not None:
            _run("groupadd", group)
        for i, name in enumerate(names):
            extra = ["--groups", group] if group is not None and i == 0 else []
            _run("useradd", "--create-home", "--user-group", "--shell", "/bin/sh", *extra, name)
            created.append(name)
        accounts = [lookup(name) for name in names]
        assert all(a is not None for a in accounts)
        yield [a for a in accounts if a is not None]
    finally:
        left: list[str] = []
        for name in created:
            done = subprocess.run(["userdel", "--remove", name], check=False, capture_output=True, timeout=60)
            if done.returncode not in (0, 12):  # 12: the home directory could not be removed (already gone)
                left.append(f"{name}: {done.stderr.decode().strip()}")
        if group is not None:
            subprocess.run(["groupdel", group], check=False, capture_output=True, timeout=60)
        if left:
            raise AssertionError(f"accounts left behind (a job of theirs still runs?): {left}")


@contextmanager
def open_root() -> Iterator[Path]:
    """A fresh directory under /tmp that any account may pass through but not list (0711), removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="allot-runas-"))
    try:
        root.chmod(0o711)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
