"""Page cursors of the listing endpoints: opaque strings that carry where the last page stopped.

Owns: encoding a listing's tag and sort key (integers, then the job id last) as URL-safe base64, and decoding it
back, refusing with BadRequest any cursor this server did not hand out for that listing (another listing's tag, a
wrong shape, bytes that are not base64 or UTF-8).

Must not: know which listing sorts by what (each caller passes its tag and the number of integer keys).
"""

from __future__ import annotations

import base64
import binascii

from allotment.service.errors import BadRequest


def encode(tag: str, *keys: int, job_id: str) -> str:
    """The cursor after the job `job_id` whose sort keys are `keys`, for the listing `tag`."""
    raw = ":".join([tag, *(str(k) for k in keys), job_id])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: str, tag: str, keys: int) -> tuple[tuple[int, ...], str]:
    """The `keys` integer sort keys and the job id of a cursor handed out for the listing `tag`."""
    try:
        parts = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split(":")  # ids have no ":"
        if len(parts) != keys + 2 or parts[0] != tag:
            raise ValueError(parts[0])
        return tuple(int(p) for p in parts[1:-1]), parts[-1]
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadRequest(f"cursor {cursor!r} is not one this server handed out") from None
