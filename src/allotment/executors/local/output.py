"""Reading an attempt's output files as the supervisor wrote them, and nothing a job put in their place.

Owns: finding an attempt's log file (every replica, or one replica of a gang) under the executor's state
directory and reading a byte range of it without following any link below that directory, without blocking (a
FIFO in the file's place is refused, not opened for a read that waits for a writer) and only when it is a
regular file with one link, owned by the owner of the state directory (the supervisor's files).

Must not: write or repair anything, or import anything but the standard library and this package's supervisor
(whose names for the files it uses).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from allotment.executors.local import supervisor as sv

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_BELOW = _DIR | os.O_NOFOLLOW
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UntrustedOutput(Exception):
    """The attempt's output path holds something the supervisor did not write (a link, a FIFO, a directory, a
    file with another owner or a second name): nothing of it was read."""


@dataclass(frozen=True, slots=True)
class Chunk:
    data: bytes
    size: int
    """The file's size when it was read (0 when it does not exist yet)."""


def output_name(replicas: int, replica: int | None) -> str:
    """The file holding `replica`'s output (None: every replica's, labelled for a gang)."""
    if replica is None or replicas <= 1:
        return sv.OUTPUT
    return sv.replica_output(replica)


def read_output(state_dir: Path, job_id: str, attempt: int, name: str, offset: int, limit: int) -> Chunk:
    """Up to `limit` bytes of `<state_dir>/jobs/<job_id>/<attempt>/<name>` from `offset`. A missing file (or
    directory) is an empty chunk; anything but the supervisor's regular file is UntrustedOutput."""
    parts = ["jobs", job_id, str(attempt), name]
    if any(not part or "/" in part or part in (".", "..") for part in parts):
        raise UntrustedOutput(f"{'/'.join(parts)} is not a plain path below the state directory")
    try:
        fd = os.open(state_dir, _DIR)  # the operator's configured directory: it may itself be a link
    except FileNotFoundError:
        return Chunk(b"", 0)
    try:
        owner = -1
        for part in parts[:-1]:
            below = _open(part, _BELOW, fd)
            if below is None:
                return Chunk(b"", 0)
            os.close(fd)
            fd = below
            if owner < 0:
                owner = os.fstat(fd).st_uid  # the owner of jobs/: whoever runs the executor
        file_fd = _open(parts[-1], _FILE, fd)
    finally:
        os.close(fd)
    if file_fd is None:
        return Chunk(b"", 0)
    try:
        info = os.fstat(file_fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedOutput(f"{name} is not a regular file")
        if info.st_nlink != 1 or info.st_uid != owner:
            raise UntrustedOutput(f"{name} is not the file the supervisor wrote")
        data = os.pread(file_fd, limit, offset) if offset < info.st_size else b""
        return Chunk(data, info.st_size)
    finally:
        os.close(file_fd)


def _open(name: str, flags: int, dir_fd: int) -> int | None:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO):
            raise UntrustedOutput(f"{name} is a link or not what it should be ({os.strerror(exc.errno)})") from None
        raise
