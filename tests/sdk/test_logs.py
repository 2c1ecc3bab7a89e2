"""A job's output over real HTTP and the SDK: a job cannot make the logs endpoint hang the server (a FIFO in its
log's place) or read another file (a symlink, a hard link, its attempt directory swapped for a link), and a gang's
output has each replica's lines once, labelled, with one replica's own output on request, followed by offset."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from allotment.sdk import ApiError, Client, models
from tests.sdk.live import LiveServer, wait_for

PY = sys.executable
SECRET = "TOP-SECRET-of-the-server"
CONCURRENT = 48
"""More log requests at once than the server's worker threads (40), as dashboards polling a stuck log would be."""

# Each job runs in its attempt directory (the default working directory) and replaces what the API reads there.
HOSTILE = {
    "fifo": "os.unlink('output.log'); os.mkfifo('output.log')",
    "symlink": "os.unlink('output.log'); os.symlink(target + '/output.log', 'output.log')",
    "hard-link": "os.unlink('output.log'); os.link(target + '/output.log', 'output.log')",
    "attempt-dir-swapped-for-a-link": "here = os.getcwd(); os.rename(here, here + '.moved'); os.symlink(target, here)",
}


@pytest.fixture
def ben(live: LiveServer) -> Iterator[Client]:
    with Client(live.url, live.tokens["ben"]) as client:
        yield client


def finished(client: Client, job_id: str) -> models.JobDetail:
    wait_for(lambda: client.job(job_id).state in ("completed", "failed", "cancelled", "lost"), f"{job_id} to end")
    return client.job(job_id)


def run_hostile(ben: Client, swap: str, target: Path) -> str:
    """A job that swaps its log (or its attempt directory) once the engine has seen it start, then ends. How it
    ends does not matter here (a swapped attempt directory also hides the supervisor's records from the engine)."""
    code = (
        f"import os, time; target = {str(target)!r}; print('before the swap', flush=True); time.sleep(1); {swap}; "
        "print('after')"
    )
    job = ben.submit({"name": "hostile", "budget": "pretrain", "command": [PY, "-c", code]}).job.id
    finished(ben, job)
    return job


@contextlib.contextmanager
def released(fifo: Path) -> Iterator[None]:
    """On the way out, open the FIFO for writing once, so that a server thread stuck opening it (the old code) is
    freed and the server can stop."""
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_fifo_in_place_of_the_log_hangs_neither_logs_nor_health(live: LiveServer, ben: Client) -> None:
    job = run_hostile(ben, HOSTILE["fifo"], live.data_dir)
    fifo = live.data_dir / "executor" / "jobs" / job / "0" / "output.log"
    headers = {"Authorization": f"Bearer {live.tokens['ben']}"}
    with released(fifo), httpx.Client(base_url=live.url, headers=headers, timeout=15) as http:
        with ThreadPoolExecutor(CONCURRENT) as pool:
            answers = list(pool.map(lambda _: http.get(f"/jobs/{job}/logs"), range(CONCURRENT)))
        for answer in answers:
            assert answer.status_code == 409, answer.text
            body = answer.json()
            assert body["error"] == "conflict" and "not a regular file" in body["message"]
            assert [p["field"] for p in body["problems"]] == ["attempt"]
        assert http.get("/healthz").status_code == 200
        assert http.get("/health").json()["database"] is True


@pytest.mark.parametrize("swap", ["symlink", "hard-link", "attempt-dir-swapped-for-a-link"])
def test_a_link_in_place_of_the_log_shows_nothing_of_its_target(
    live: LiveServer, ben: Client, tmp_path: Path, swap: str
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "output.log").write_text(f"{SECRET}\n")  # owned by the server's user, like its own files
    job = run_hostile(ben, HOSTILE[swap], target)
    with pytest.raises(ApiError) as refused:
        ben.logs(job)
    error = refused.value
    assert error.status == 409 and error.error == "conflict"
    assert "cannot be shown" in error.message and [p.field for p in error.problems] == ["attempt"]
    assert SECRET not in str(error) and SECRET not in error.message


GANG = "import os\nr = os.environ['ALLOT_REPLICA']\nfor i in range(3): print(f'replica {r} step {i}', flush=True)\n"


def test_a_gang_shows_each_replicas_lines_once_labelled_or_one_replica(ben: Client) -> None:
    spec = {"name": "gang", "budget": "pretrain", "command": [PY, "-c", GANG], "resources": {"gpus": 8, "replicas": 2}}
    job = ben.submit(spec).job.id
    assert finished(ben, job).state == "completed"
    everything = "".join(c.data for c in ben.follow_logs(job, follow=False)).splitlines()
    assert sorted(everything) == sorted(f"{r}: replica {r} step {i}" for r in (0, 1) for i in range(3))
    for r in (0, 1):
        assert [line for line in everything if line.startswith(f"{r}: ")] == [
            f"{r}: replica {r} step {i}" for i in range(3)
        ]
        chunks = list(ben.follow_logs(job, replica=r))
        assert all(c.replica == r for c in chunks) and chunks[-1].complete
        assert "".join(c.data for c in chunks) == "".join(f"replica {r} step {i}\n" for i in range(3))
    # following by offset works per stream: small chunks add up to the same text
    offset, text = 0, ""
    while not (chunk := ben.logs(job, replica=1, offset=offset, limit=5)).complete:
        text, offset = text + chunk.data, chunk.next_offset
    assert text + chunk.data == "".join(f"replica 1 step {i}\n" for i in range(3))
    with pytest.raises(ApiError) as bad:
        ben.logs(job, replica=2)
    assert bad.value.status == 422 and [p.field for p in bad.value.problems] == ["replica"]
    assert "between 0 and 1" in bad.value.problems[0].reason
