"""Who a job runs as: the Unix account of each Allotment user, and the server's run-as mode.

Owns: the run-as modes (`owner`: every job runs as its owner's Unix account; `single-user`: every job runs as the
server's own account, for a laptop or the demo; `auto`: owner when the server is privileged, else single-user),
whether this process is privileged (root), the user → account mapping (the same name unless the configuration's
`run_as.accounts` maps it), the pwd/grp look-ups that turn an account into uid, gid, supplementary groups and home,
and the one "no Unix account" error the service, the local executor and the Slurm executor all raise; and the
one rule for the directories jobs own (`passable_dir` root 0711, then one `private_dir` 0700 per account).

Must not: start processes, change its own identity, or import anything but the standard library (the local
executor imports it and runs with the repository alone on PYTHONPATH; the supervisor gets the resolved account
through spec.json, never by importing this).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path


class Mode(StrEnum):
    OWNER = "owner"
    SINGLE_USER = "single-user"
    AUTO = "auto"


class RunAsError(RuntimeError):
    """The run-as mode cannot be honoured (owner mode asked for by a server without the privilege to switch users)."""


class NoAccount(LookupError):
    """An Allotment user has no Unix account to run jobs as (owner mode)."""

    def __init__(self, user: str, account: str) -> None:
        self.user = user
        self.account = account
        mapped = "" if account == user else f" (run_as.accounts maps it to {account!r})"
        self.message = (
            f"user {user!r} has no Unix account {account!r} on the server{mapped}, so no job of theirs can run: "
            f"create the account (useradd {account}) or map the user to an existing one in the configuration's "
            f"run_as.accounts"
        )
        super().__init__(self.message)


@dataclass(frozen=True, slots=True)
class Account:
    """A Unix account a job runs as, resolved from the password and group databases."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    """Every group of the account (primary first), as initgroups would set them."""
    home: str
    shell: str

    def spec(self) -> dict[str, object]:
        """The account as the supervisor reads it from spec.json."""
        return {
            "name": self.name,
            "uid": self.uid,
            "gid": self.gid,
            "groups": list(self.groups),
            "home": self.home,
            "shell": self.shell,
        }


def privileged() -> bool:
    """Whether this process may switch to other users' accounts (its effective uid is root)."""
    return os.geteuid() == 0


def lookup(name: str) -> Account | None:
    """The account `name` from the password database, or None when there is none."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = [entry.pw_gid]
    for gid in os.getgrouplist(entry.pw_name, entry.pw_gid):
        if gid not in groups:
            groups.append(gid)
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, tuple(groups), entry.pw_dir, entry.pw_shell)


def private_dir(path: Path, account: Account) -> Path:
    """`path` as a directory of `account`'s alone (0700): created and handed over (never through a symlink), or an
    existing one it already owns (a re-sent launch). Raises PermissionError for anything else at `path`."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != account.uid:
            raise PermissionError(f"{path} exists and is not a directory of {account.name}") from None
        return path
    os.chown(path, account.uid, account.gid, follow_symlinks=False)
    return path


def passable_dir(path: Path) -> Path:
    """`path` as the server's directory that every account may pass through but none may list (0711): the root
    under which each account has its own private_dir."""
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o711)
    return path


def identity_environment(account: Account) -> dict[str, str]:
    """HOME, USER, LOGNAME and SHELL of `account`, for a process that runs as it."""
    return {"HOME": account.home, "USER": account.name, "LOGNAME": account.name, "SHELL": account.shell or "/bin/sh"}


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


@dataclass(frozen=True, slots=True)
class RunAs:
    """The resolved run-as setting of one server: its mode (never AUTO) and the user → account map."""

    mode: Mode = Mode.SINGLE_USER
    accounts: Mapping[str, str] = field(default_factory=dict)
    """Allotment user → Unix account name, for users whose account is not named like them."""

    def __post_init__(self) -> None:
        if self.mode is Mode.AUTO:
            raise ValueError("RunAs holds a resolved mode: use RunAs.resolve for auto")

    @classmethod
    def resolve(
        cls, mode: Mode | str, accounts: Mapping[str, str] | None = None, *, is_privileged: bool | None = None
    ) -> RunAs:
        """The mode a server runs in: `auto` becomes owner when privileged, else single-user; `owner` without the
        privilege is refused (RunAsError), never quietly downgraded."""
        try:
            wanted = Mode(mode)
        except ValueError:
            choices = ", ".join(m.value for m in Mode)
            raise RunAsError(f"run-as mode {mode!r} is not one of: {choices}") from None
        allowed = privileged() if is_privileged is None else is_privileged
        if wanted is Mode.AUTO:
            wanted = Mode.OWNER if allowed else Mode.SINGLE_USER
        if wanted is Mode.OWNER and not allowed:
            raise RunAsError(
                f"run_as.mode owner needs a privileged server (root) to run jobs as their owners; this one runs as "
                f"{server_account()} (uid {os.geteuid()}): start it as root, or choose run_as.mode single-user "
                f"(every job then runs as {server_account()})"
            )
        return cls(wanted, dict(accounts or {}))

    @property
    def owner(self) -> bool:
        return self.mode is Mode.OWNER

    def account_name(self, user: str) -> str:
        """The Unix account name `user` maps to (the same name unless run_as.accounts says otherwise)."""
        return self.accounts.get(user, user)

    def account(self, user: str) -> Account | None:
        """The account a job of `user` runs as: None in single-user mode (the server's own account). Raises
        NoAccount in owner mode when the user has no account, or maps to root (a job never runs as root)."""
        if not self.owner:
            return None
        name = self.account_name(user)
        found = lookup(name)
        if found is None or found.uid == 0:
            raise NoAccount(user, name)
        return found

    def require(self, user: str) -> None:
        """Raise NoAccount when, in owner mode, `user` has no account a job could run as (a password-database look-up
        only: submissions check this, launches resolve the whole account)."""
        if not self.owner:
            return
        name = self.account_name(user)
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            raise NoAccount(user, name) from None
        if uid == 0:
            raise NoAccount(user, name)

    def describe(self) -> str:
        """One line for the start-up log and /health."""
        if self.owner:
            return "owner mode: each job runs as its owner's Unix account"
        return f"single-user mode: every job runs as the server's own account {server_account()!r}"


def server_account() -> str:
    """This process's effective user name (its uid when the password database has no entry)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
