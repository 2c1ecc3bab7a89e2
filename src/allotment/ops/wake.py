"""Waking the engine from another process: the API workers of `allot server --api-workers N` tell the engine a
request is waiting through a Unix datagram socket in the data directory.

Owns: `WakeListener` (the engine's side: binds `data_dir/engine-wake.sock`, mode 0600, and sets the engine's wake
event on every datagram), `WakeSender` (a worker's side: `set()` sends one byte and never fails or blocks: a full
buffer or a missing engine only means the engine's next periodic cycle picks the request up) and `wake_path`.

Must not: carry data (a datagram says "cycle now", nothing else; what to do is in the database) or decide anything.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

WAKE_SOCKET = "engine-wake.sock"
_MAX_UNIX_PATH = 100
"""sun_path holds 108 bytes on Linux (104 on macOS); stay under both."""


def wake_path(data_dir: Path) -> Path:
    """Where the engine listens for wakes; refuses a data directory whose socket path would not fit sun_path."""
    path = data_dir.resolve() / WAKE_SOCKET
    if len(os.fsencode(path)) > _MAX_UNIX_PATH:
        raise ValueError(
            f"--data-dir {data_dir} is too deep for the engine's wake socket ({len(os.fsencode(path))} bytes, at "
            f"most {_MAX_UNIX_PATH}): use a shorter path for API workers"
        )
    return path


@dataclass
class WakeListener:
    """Sets `event` whenever a datagram reaches `path`, on a daemon thread, until `close()`."""

    path: Path
    event: threading.Event
    _sock: socket.socket = field(init=False)
    _thread: threading.Thread = field(init=False)
    _closed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket from a killed server
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        old = os.umask(0o177)
        try:
            self._sock.bind(str(self.path))
        finally:
            os.umask(old)
        self._sock.settimeout(0.5)
        self._thread = threading.Thread(target=self._listen, name="allotment-wake", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                self._sock.recv(64)
            except TimeoutError:
                continue
            except OSError:
                return
            self.event.set()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(2)
        self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass
class WakeSender:
    """A worker's wake: `set()` asks the engine for a cycle now (the service's Wake protocol)."""

    path: Path
    _sock: socket.socket = field(init=False)

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)

    def set(self) -> None:
        with contextlib.suppress(OSError):  # no engine listening, or its buffer is full: a cycle is coming anyway
            self._sock.sendto(b"w", str(self.path))

    def close(self) -> None:
        self._sock.close()
