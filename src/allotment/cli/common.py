"""What every client command of `allot` shares: the SDK client, error reporting, exit codes and JSON output.

Owns: building the Client (ALLOT_URL / ALLOT_TOKEN, else the file `allot login` wrote), turning an ApiError into a
message with its problems and an exit code by cause (`exit_code`, the one table of docs/cli.md "Exit codes": 2 bad
input, 3 not found, 4 not allowed, 5 conflict, 6 server unreachable or unavailable, 7 rate limited, 1 anything
else), and printing models as JSON.

Must not: render tables (see `render`) or know endpoints (the SDK does).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from allotment.sdk import ApiError, Client

EXIT_API = 1
"""Any other failure: the server's own error (500), a wait that timed out, a session that ended before it started."""
EXIT_INPUT = 2
"""Bad input: an option, a file, or what the server refused as invalid or too large (400, 413, 422); Typer's own
usage errors exit 2 as well."""
EXIT_NOT_FOUND = 3
EXIT_PERMISSION = 4
"""Not logged in, a bad or expired token (401), or not allowed (403)."""
EXIT_CONFLICT = 5
"""The request conflicts with the current state (409): e.g. cancelling a finished job, a reused request id."""
EXIT_UNREACHABLE = 6
"""No answer from the server, or it is not ready (502, 503, 504)."""
EXIT_RATE_LIMITED = 7

_BY_STATUS = {
    400: EXIT_INPUT,
    413: EXIT_INPUT,
    422: EXIT_INPUT,
    404: EXIT_NOT_FOUND,
    401: EXIT_PERMISSION,
    403: EXIT_PERMISSION,
    409: EXIT_CONFLICT,
    0: EXIT_UNREACHABLE,
    502: EXIT_UNREACHABLE,
    503: EXIT_UNREACHABLE,
    504: EXIT_UNREACHABLE,
    429: EXIT_RATE_LIMITED,
}

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of tables.")]

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def client() -> Client:
    """The client of the server the environment (ALLOT_URL, ALLOT_TOKEN) or `allot login`'s file names."""
    try:
        return Client.from_env()
    except ValueError as error:  # a malformed config file
        fail(str(error), EXIT_INPUT)


def fail(message: str, code: int = EXIT_INPUT) -> NoReturn:
    err.print(f"[red]✗[/red] {escape(message)}")
    raise typer.Exit(code=code)


def report(error: ApiError) -> int:
    """Print an API failure (with each problem's field and line) and return its exit code."""
    err.print(f"[red]✗[/red] {escape(error.message)}" + (f" [dim]({error.status})[/dim]" if error.status else ""))
    for p in error.problems:
        where = f"line {p.line}: " if p.line is not None else ""
        err.print(f"  • {escape(where)}[bold]{escape(p.field or '(request)')}[/bold]: {escape(p.reason)}")
    if error.status == 401:
        err.print("  [dim]log in with `allot login`, or set ALLOT_URL and ALLOT_TOKEN[/dim]")
    return exit_code(error)


def exit_code(error: ApiError) -> int:
    """The exit code of a failed API call, by its cause (status 0: no response came back)."""
    return _BY_STATUS.get(error.status, EXIT_API)


@contextmanager
def api_call() -> Iterator[None]:
    """Run SDK calls; an ApiError ends the command with its message and exit code."""
    try:
        yield
    except ApiError as error:
        raise typer.Exit(code=report(error)) from None


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror or error}")
    except UnicodeDecodeError:
        fail(f"{path} is not UTF-8 text")


def dump(value: BaseModel | Sequence[BaseModel] | dict[str, Any]) -> None:
    """Print a model, a list of models or a mapping as indented JSON on stdout."""
    if isinstance(value, BaseModel):
        data: Any = value.model_dump(mode="json")
    elif isinstance(value, dict):
        data = value
    else:
        data = [v.model_dump(mode="json") for v in value]
    typer.echo(json.dumps(data, indent=2))
