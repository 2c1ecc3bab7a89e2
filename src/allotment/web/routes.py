"""The dashboard's routes: `/` serves the single page, `/ui/…` its script and style.

Owns: mounting those on an application (`mount`), with caching headers that make a redeployed dashboard load at
once. The page itself needs no token: it holds no data, and asks for a token before it calls the API.

Must not: serve data or answer API paths (the API's routers do).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent / "static"
NO_CACHE = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"}


def mount(app: FastAPI) -> None:
    """Serve the dashboard from `app`: the page at `/`, its assets under `/ui/`."""

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=NO_CACHE)

    app.mount("/ui", StaticFiles(directory=STATIC), name="dashboard-assets")
