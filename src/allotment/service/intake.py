"""Submissions by group commit: many concurrent submissions share one transaction.

Owns: `Intake`, a queue of submissions and the one writer thread that drains it. The writer takes every submission
waiting (up to `max_batch`), hands them to `jobs.submit_jobs` as one batch (one transaction: the budget tree and the
clusters read once, one INSERT per table), and answers each caller with its own job or its own error. While a
batch is being written the next one gathers, so under load a commit serves hundreds of submissions, and with one
caller a batch is that caller's submission alone (no timer adds latency). One writer also means the submissions of
this process never queue for the database's write lock against each other (SQLite has one writer), and never
convoy on the interpreter lock in a pool of threads.

Callers await from any event loop (`submit`); the answer is set on the caller's own loop. The writer starts with
the first submission and is a daemon thread: what it holds in flight when the process dies was never acknowledged,
so a client retries it (with a request id the retry is idempotent).

Must not: check or write anything itself (service.jobs does), let one submission fail others, or outlive an error:
when a batch fails unexpectedly (one submission trips something no check foresaw), its submissions are written again
one at a time, so only the culprit hears the error; a failure because the database is away becomes every caller's
error at once; and the writer carries on with the next batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from dataclasses import dataclass

from allotment.service import jobs
from allotment.service.context import Context
from allotment.service.jobs import SubmitRequest
from allotment.service.views import Submitted
from allotment.store.db import unavailable

log = logging.getLogger("allotment.intake")


@dataclass(frozen=True, slots=True)
class _Waiting:
    request: SubmitRequest
    loop: asyncio.AbstractEventLoop
    answer: asyncio.Future[Submitted]


class Intake:
    def __init__(self, ctx: Context, max_batch: int = 500) -> None:
        self.ctx = ctx
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Waiting] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()
        self.batches = 0
        """Batches written so far (for tests and the load benchmark's report)."""

    async def submit(self, request: SubmitRequest) -> Submitted:
        """Queue the submission and wait for its batch to commit; raises the error that refused it."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Submitted] = loop.create_future()
        self._ensure_writer()
        self._queue.put(_Waiting(request, loop, answer))
        return await answer

    def _ensure_writer(self) -> None:
        if self._writer is not None:
            return
        with self._lock:
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_forever, name="allotment-intake", daemon=True)
                self._writer.start()

    def _write_forever(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[_Waiting]) -> None:
        results: list[Submitted | BaseException]
        try:
            results = list(jobs.submit_jobs(self.ctx, [w.request for w in batch]))
        except Exception as exc:
            if len(batch) == 1 or unavailable(exc):  # the database is away: every caller hears it
                log.warning("a batch of %d submissions failed: %s", len(batch), type(exc).__name__)
                results = [exc] * len(batch)
            else:  # one submission tripped something: write them one at a time, so only it fails
                log.warning("a batch of %d submissions failed (%s): one at a time", len(batch), type(exc).__name__)
                results = [self._alone(w.request) for w in batch]
        self.batches += 1
        for waiting, result in zip(batch, results, strict=True):
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this answer any more
                waiting.loop.call_soon_threadsafe(_settle, waiting.answer, result)

    def _alone(self, request: SubmitRequest) -> Submitted | BaseException:
        try:
            [result] = jobs.submit_jobs(self.ctx, [request])
        except Exception as exc:
            log.warning("a submission failed: %s", type(exc).__name__)
            return exc
        return result


def _settle(answer: asyncio.Future[Submitted], result: Submitted | BaseException) -> None:
    if answer.done():  # the caller went away (its request was cancelled)
        return
    if isinstance(result, BaseException):
        answer.set_exception(result)
    else:
        answer.set_result(result)
