"""Page cursors: what one listing hands out comes back as it went, and a cursor of another listing, of another shape
or not base64 at all is refused with BadRequest (400), never mistaken for a place in the list."""

from __future__ import annotations

import pytest

from allotment.service import cursors
from allotment.service.errors import BadRequest


def test_a_cursor_comes_back_as_it_was_handed_out() -> None:
    cursor = cursors.encode("s", 1_796_000_000, 42, job_id="j-3f9c0a1b2c3d")
    assert cursors.decode(cursor, "s", 2) == ((1_796_000_000, 42), "j-3f9c0a1b2c3d")


@pytest.mark.parametrize(
    ("cursor", "tag", "keys"),
    [
        pytest.param(cursors.encode("q", 5, job_id="j-1"), "h", 1, id="another-listings-cursor"),
        pytest.param(cursors.encode("s", 5, 6, job_id="j-1"), "s", 1, id="another-shape"),
        pytest.param(cursors.encode("q", 5, job_id="j-1"), "s", 2, id="too-few-keys"),
        pytest.param("bm9wZQ", "q", 1, id="base64-but-not-a-cursor"),
        pytest.param("%%%", "q", 1, id="not-base64"),
        pytest.param("", "j", 1, id="empty"),
    ],
)
def test_a_cursor_not_handed_out_for_this_listing_is_refused(cursor: str, tag: str, keys: int) -> None:
    with pytest.raises(BadRequest, match="not one this server handed out"):
        cursors.decode(cursor, tag, keys)
