"""Whose account a job runs as (executors/accounts.py): the run-as mode a server resolves to, the user → account
map, and the "no account" error every layer reports the same way."""

from __future__ import annotations

import re

import pytest

from allotment.executors.accounts import Mode, NoAccount, RunAs, RunAsError, lookup


@pytest.mark.parametrize(
    ("asked", "privileged", "resolved"),
    [
        pytest.param("single-user", True, Mode.SINGLE_USER, id="single-user-as-root"),
        pytest.param("single-user", False, Mode.SINGLE_USER, id="single-user-unprivileged"),
        pytest.param("owner", True, Mode.OWNER, id="owner-as-root"),
        pytest.param("auto", True, Mode.OWNER, id="auto-as-root"),
        pytest.param("auto", False, Mode.SINGLE_USER, id="auto-unprivileged"),
    ],
)
def test_the_mode_a_server_runs_in(asked: str, privileged: bool, resolved: Mode) -> None:
    assert RunAs.resolve(asked, is_privileged=privileged).mode is resolved


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        pytest.param("owner", "run_as.mode owner needs a privileged server (root)", id="owner-unprivileged"),
        pytest.param("owners", "is not one of: owner, single-user, auto", id="unknown-mode"),
    ],
)
def test_a_mode_that_cannot_be_honoured_is_refused_not_downgraded(asked: str, message: str) -> None:
    with pytest.raises(RunAsError, match=re.escape(message)):
        RunAs.resolve(asked, is_privileged=False)


def test_single_user_mode_resolves_no_account_and_refuses_nobody() -> None:
    mode = RunAs(Mode.SINGLE_USER)
    assert mode.account("nobody-has-this-name") is None
    mode.require("nobody-has-this-name")
    assert "single-user mode" in mode.describe()


def test_users_map_to_accounts_of_their_own_name_unless_mapped() -> None:
    mode = RunAs(Mode.OWNER, {"ada": "nobody"})
    assert (mode.account_name("ada"), mode.account_name("ben")) == ("nobody", "ben")
    account = mode.account("ada")
    expected = lookup("nobody")
    assert account is not None and account == expected and account.uid != 0


@pytest.mark.parametrize(
    ("accounts", "user", "account"),
    [
        pytest.param({}, "no-such-user-x", "no-such-user-x", id="missing"),
        pytest.param({"ada": "no-such-acct-x"}, "ada", "no-such-acct-x", id="mapped-missing"),
        pytest.param({"ada": "root"}, "ada", "root", id="root-is-never-an-owner"),
    ],
)
def test_owner_mode_names_the_user_and_the_fix(accounts: dict[str, str], user: str, account: str) -> None:
    mode = RunAs(Mode.OWNER, accounts)
    for check in (mode.require, mode.account):
        with pytest.raises(NoAccount) as caught:
            check(user)
        assert caught.value.message.startswith(f"user {user!r} has no Unix account {account!r}")
        assert f"useradd {account}" in caught.value.message and "run_as.accounts" in caught.value.message
