"""Waiting for a requested session: progress with the current reason, and withdrawing the request on Ctrl-C or
SIGTERM.

Owns: the wait loop of `allot session` (poll the session; while it waits, ask why it waits), what it shows (on a
terminal a spinner with the state, the reason in numbers, the estimated start and the time waited; elsewhere, as in a
script or a log, one line each time the reason changes and a line every `HEARTBEAT` seconds while it does not), and
the withdrawal: Ctrl-C (SIGINT) or SIGTERM during the wait releases the request (DELETE /sessions/{id}), says so and
exits 130 or 143, so an interrupted `allot session` never leaves a request queued behind it.

Must not: talk HTTP itself (the SDK does) or build the request (`cli.jobs.session` does).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from allotment.cli import render
from allotment.cli.common import EXIT_API, err
from allotment.core.jobstate import FINAL
from allotment.sdk import ApiError, Client
from allotment.sdk import models as m

POLL = 0.5
"""Seconds between polls of the session."""
HEARTBEAT = 10.0
"""Seconds between progress lines while the reason stays the same (when stderr is not a terminal)."""
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
"""The shell's codes for a command ended by SIGINT or SIGTERM (128 + the signal)."""


class Interrupted(Exception):
    """The wait was interrupted by a signal; `code` is the exit code to end with."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@contextmanager
def _terminate_interrupts() -> Iterator[None]:
    """Turn SIGTERM into `Interrupted` while the wait runs (SIGINT arrives as KeyboardInterrupt already)."""

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(EXIT_SIGTERM)

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: no handler can be installed, and SIGTERM keeps its default
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def describe(session: m.Session, why: m.Why | None, waited: float, now: float) -> str:
    """One line of progress: the state, why it waits (the engine's reason in numbers) and the estimated start."""
    job = session.job
    text = f"session {job.id}: {job.state}"
    if why is not None and why.message:
        text += f", {why.message}"
        if why.estimated_start is not None:
            text += f"; estimated start in {render.ago(max(0, int(why.estimated_start - now)))}"
    elif job.state_reason:
        text += f", {job.state_reason}"
    return f"{text} (waited {waited:.0f}s)"


def _reason(api: Client, session: m.Session) -> m.Why | None:
    if session.job.state != "pending":
        return None
    try:
        return api.why(session.job.id)
    except ApiError:  # e.g. it ended between the two calls: the next poll says so
        return None


class _Progress:
    """Shows each poll: a spinner on a terminal, otherwise a line when the reason changes or HEARTBEAT passes."""

    def __init__(self, console: Console, show: Callable[[str], None] | None) -> None:
        self.console, self.show = console, show
        self.last_reason: str | None = None
        self.last_line = 0.0

    def __call__(self, session: m.Session, why: m.Why | None, waited: float) -> None:
        line = describe(session, why, waited, time.time())
        if self.show is not None:
            self.show(line)
            return
        reason = line.rsplit(" (waited", 1)[0]
        at = time.monotonic()
        if reason != self.last_reason or at - self.last_line >= HEARTBEAT:
            self.console.print(escape(line), soft_wrap=True)
            self.last_reason, self.last_line = reason, at


def wait(api: Client, session: m.Session, *, timeout: float, console: Console = err) -> m.Session:
    """Poll until the session is ready or has ended (returned), showing progress. A timeout exits EXIT_API with the
    request left queued (said so); Ctrl-C or SIGTERM withdraws the request and exits 130 or 143."""
    job_id, started = session.job.id, time.monotonic()
    current = session
    try:
        with _terminate_interrupts():
            if console.is_terminal:
                with console.status(f"waiting for session {job_id}…") as spinner:
                    progress = _Progress(console, lambda line: spinner.update(escape(line)))
                    return _loop(api, current, started, timeout, progress)
            return _loop(api, current, started, timeout, _Progress(console, None))
    except KeyboardInterrupt:
        _withdraw(api, job_id, console, EXIT_SIGINT)
    except Interrupted as stop:
        _withdraw(api, job_id, console, stop.code)


def _loop(api: Client, current: m.Session, started: float, timeout: float, progress: _Progress) -> m.Session:
    deadline = started + timeout
    while True:
        why = _reason(api, current)
        progress(current, why, time.monotonic() - started)
        if current.ready or current.job.state in FINAL:
            return current
        if time.monotonic() >= deadline:
            reason = why.message if why is not None else current.job.state_reason
            job_id = current.job.id
            err.print(f"[yellow]![/yellow] session {job_id} is not ready after {timeout:g}s ({escape(reason)}); "
                      f"it stays queued: allot why {job_id} · allot cancel {job_id}")  # fmt: skip
            raise typer.Exit(code=EXIT_API)
        time.sleep(POLL)
        current = api.session(current.job.id)


def _withdraw(api: Client, job_id: str, console: Console, code: int) -> NoReturn:
    """Release the request the interrupted wait was for, say what happened, and exit with `code`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the withdrawal itself
    try:
        released = api.release_session(job_id)
    except ApiError as error:
        if error.status == 409:  # it ended meanwhile: nothing is left queued
            console.print(f"[yellow]![/yellow] session {job_id} had already ended; nothing to withdraw")
        else:
            console.print(f"[red]✗[/red] could not withdraw session {job_id}: {escape(error.message)}; "
                          f"cancel it with `allot cancel {job_id}`")  # fmt: skip
        sys.stderr.flush()
        raise typer.Exit(code=code) from None
    console.print(f"[yellow]![/yellow] interrupted: withdrew session {job_id} (cancel requested, was {released.state})")
    raise typer.Exit(code=code)
