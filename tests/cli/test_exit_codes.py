"""`allot` exits with a code by cause (docs/cli.md, "Exit codes"): 2 usage or validation, 3 not found, 4 not
allowed (401/403), 5 conflict, 6 server unreachable, 7 rate limited — each through the real command line against a
real server (whose token issuance is limited to one per user, so a second login is rate limited)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.conftest import Allot
from tests.sdk.live import LiveServer, live_server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ALLOT_TOKEN_RATE", "0.001")
        env.setenv("ALLOT_TOKEN_BURST", "1")  # the fixture's own login per user uses it up
        with live_server(tmp_path_factory.mktemp("exits") / "data") as server:
            yield server


RUN = ("run", "--budget", "pretrain")


@pytest.mark.parametrize(
    ("user", "before", "args", "env", "code", "says"),
    [
        pytest.param("ben", (), ("run", "--budget", "pretrain"), {}, 2, "give the command", id="usage-local"),
        pytest.param("ben", (), ("queue", "--no-such-flag"), {}, 2, "No such option", id="usage-typer"),
        pytest.param("ben", (), (*RUN, "--grace", "1d", "--", "true"), {}, 2, "grace", id="validation-422"),
        pytest.param("ben", (), ("status", "j-000000000000"), {}, 3, "j-000000000000", id="not-found"),
        pytest.param(
            None, (), ("queue",), {"ALLOT_TOKEN": "allot_not-a-token"}, 4, "allot login", id="unauthenticated"
        ),
        pytest.param("ben", (), ("node", "drain", "lab-h100-0003"), {}, 4, "(403)", id="forbidden"),
        pytest.param(
            "ben",
            ((*RUN, "--request-id", "once", "--", "true"),),
            (*RUN, "--request-id", "once", "--", "false"),
            {},
            5,
            "(409)",
            id="conflict",
        ),
        pytest.param("ben", (), ("queue",), {"ALLOT_URL": "http://127.0.0.1:9"}, 6, "cannot reach", id="unreachable"),
        pytest.param(None, (), ("login", "--user", "chen"), {"ALLOT_TOKEN": None}, 7, "(429)", id="rate-limited"),
    ],
)
def test_each_cause_has_its_exit_code(
    allot: Allot,
    user: str | None,
    before: tuple[tuple[str, ...], ...],
    args: tuple[str, ...],
    env: dict[str, str | None],
    code: int,
    says: str,
) -> None:
    for command in before:
        allot(user, *command)
    result = allot(user, *args, env=env, code=code)
    assert says in " ".join(result.output.split())
