"""Simulation reports: the report.html / report.md files the simulator writes (`allot simulate --out DIR`) under the
server's reports directory (`<data_dir>/reports`), listed and read back, read-only.

Owns: finding reports (folders up to a few levels deep holding report.html or report.md, newest first) and reading
one file — a report, or an image beside it that the report shows (the simulator's plots) — refusing any name that
would leave the reports directory (`..`, absolute paths, symbolic links) or that is neither. Reports describe
simulated workloads, not anyone's jobs: every user may read them.

Must not: write, delete or render anything (the dashboard shows HTML in a sandboxed frame and Markdown as text).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from allotment.service.context import Context
from allotment.service.dashboard_views import SimReport
from allotment.service.errors import NotFound
from allotment.service.principal import Principal

REPORT_FILES = ("report.html", "report.md")
MEDIA_TYPES = {"report.html": "text/html; charset=utf-8", "report.md": "text/markdown; charset=utf-8"}
IMAGE_TYPES = {
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
}
MAX_DEPTH = 4
MAX_REPORTS = 500


@dataclass(frozen=True, slots=True)
class ReportFile:
    content: bytes
    media_type: str


def reports_dir(ctx: Context) -> Path:
    return ctx.data_dir / "reports"


def list_reports(ctx: Context, principal: Principal) -> list[SimReport]:
    """Every folder under the reports directory that holds a report, newest first (at most MAX_REPORTS)."""
    root = reports_dir(ctx)
    if not root.is_dir():
        return []
    found: list[SimReport] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        depth = len(here.relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirs.clear()
        dirs.sort()
        present = [f for f in REPORT_FILES if f in files and (here / f).is_file() and not (here / f).is_symlink()]
        if present:
            modified = max(int((here / f).stat().st_mtime) for f in present)
            found.append(SimReport(name=here.relative_to(root).as_posix(), files=present, modified=modified))
    found.sort(key=lambda r: (-r.modified, r.name))
    return found[:MAX_REPORTS]


def read_report(ctx: Context, principal: Principal, name: str, file: str) -> ReportFile:
    """One report file or an image beside it; NotFound for anything else, or anything outside the directory."""
    media_type = MEDIA_TYPES.get(file) or IMAGE_TYPES.get(Path(file).suffix.lower())
    if media_type is None or not file or "/" in file or file.startswith("."):
        raise NotFound(f"no report file {file!r} (report.html, report.md, or an image beside them)")
    root = reports_dir(ctx).resolve()
    parts = Path(name).parts
    if Path(name).is_absolute() or ".." in parts or len(parts) > MAX_DEPTH:
        raise NotFound(f"no report {name!r}")
    path = root.joinpath(*parts, file)
    if path.is_symlink() or not path.is_file() or not path.resolve().is_relative_to(root):
        raise NotFound(f"no report {name!r} with {file}")
    return ReportFile(content=path.read_bytes(), media_type=media_type)
