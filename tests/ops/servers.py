"""Real `allot server` processes for the fault tests: start one on a database, wait until it answers, read its
role and metrics, submit through its API, and kill it; plus a private PostgreSQL cluster that a test may stop and
start (never the shared one on 127.0.0.1:5432)."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engine.rig import ROOT, SMALL


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    client: httpx.Client = field(init=False)
    token: str = ""

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.url, timeout=10)

    def get(self, path: str) -> httpx.Response | None:
        try:
            return self.client.get(path, headers=self.auth())
        except httpx.HTTPError:
            return None

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def role(self) -> str | None:
        response = self.get("/readyz")
        return None if response is None else str(response.json()["role"])

    def metric(self, name: str) -> float:
        response = self.get("/metrics")
        assert response is not None
        for line in response.text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def login(self, user: str) -> None:
        response = self.client.post("/auth/login", json={"user": user})
        assert response.status_code == 201, response.text
        self.token = response.json()["secret"]

    def submit(self, spec: dict[str, Any], key: str | None = None) -> httpx.Response:
        headers = {**self.auth(), **({"Idempotency-Key": key} if key else {})}
        return self.client.post("/jobs", json={"spec": spec}, headers=headers)

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.client.get(f"/jobs/{job_id}", headers=self.auth())
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            self.proc.send_signal(sig)
        self.proc.wait(30)
        self.client.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def start_server(
    database_url: str,
    data_dir: Path,
    *,
    interval: float = 1.0,
    env: dict[str, str] | None = None,
    config: Path = SMALL,
    executor: str = "local",
    args: tuple[str, ...] = (),
) -> ServerProcess:
    """`allot server` on `database_url` with open login on a free port — by default the small example's virtual
    fleet on the local executor, `args` added to the command line; returns once its API answers /healthz."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / f"server-{port}.log"
    command = [
        sys.executable, "-m", "allotment.cli", "server", "--config", str(config), "--data-dir", str(data_dir),
        "--database-url", database_url, "--port", str(port), "--interval", str(interval), "--open-login",
        "--executor", executor, *args,
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), ALLOT_LOG_FORMAT="json", **(env or {})),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ServerProcess(proc, f"http://127.0.0.1:{port}", log)

    def answers() -> bool:
        if not server.alive():
            raise AssertionError(f"the server exited:\n{server.output()}")
        response = server.get("/healthz")
        return response is not None and response.status_code == 200

    wait_for(answers, 60, "the server to answer")
    return server


@dataclass
class PrivatePostgres:
    """A throw-away PostgreSQL cluster on a free port, run as the postgres user when we are root."""

    directory: Path
    port: int
    bin: Path

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-o", options, "-l", str(self.directory / "log"),
                  "-w", "start")  # fmt: skip

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "-w", "stop")


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        message = "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    directory = Path(tempfile.mkdtemp(prefix="allot-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres", "postgres")
    pg = PrivatePostgres(directory, free_port(), Path(found[-1]).parent)
    pg._run("initdb", "-D", str(directory / "data"), "-A", "trust", "-U", "postgres", "--no-sync")
    pg.start()
    try:
        yield pg
    finally:
        try:
            pg.stop()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
