"""/reports/simulations: the simulator's reports found under the server's reports directory, read-only.

Owns: the HTTP shape of listing reports and serving one file (HTML or Markdown, as stored). Must not: hold rules
(service.simreports decides what is a report and refuses paths outside the directory).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from allotment.api.auth import Caller, Ctx
from allotment.api.errors import ERROR_RESPONSES
from allotment.service import simreports
from allotment.service.dashboard_views import SimReport

router = APIRouter(prefix="/reports/simulations", tags=["reports"], responses=ERROR_RESPONSES)


@router.get("", response_model=list[SimReport])
def list_reports(ctx: Ctx, caller: Caller) -> list[SimReport]:
    """Folders under `<data_dir>/reports` holding report.html or report.md, newest first."""
    return simreports.list_reports(ctx, caller)


@router.get("/{path:path}", response_class=Response, responses={200: {"content": {"text/html": {}}}})
def read_report(path: str, ctx: Ctx, caller: Caller) -> Response:
    """One report file: `<name>/report.html` or `<name>/report.md` (as listed), or an image beside it (`.png`,
    `.svg`, `.jpg`, `.gif`: the plots a report shows), served as stored."""
    name, _, file = path.rpartition("/")
    found = simreports.read_report(ctx, caller, name, file)
    return Response(
        content=found.content,
        media_type=found.media_type,
        headers={"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox allow-scripts"},
    )
