"""The API's interactive documentation (/docs: Swagger UI, /redoc: ReDoc), served entirely by this server.

Owns: the two pages and their assets: the Swagger UI and ReDoc bundles come from the pinned `fastapi-offline`
package (its static files only), mounted under /docs/assets; Swagger UI's start-up script is a file here too, so
the pages need no CDN and no inline script, and the docs' Content-Security-Policy (ops.hardening) holds.

Must not: describe the API (FastAPI's OpenAPI document at /openapi.json does) or serve anything but the docs.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
BUNDLES = Path(str(files("fastapi_offline") / "static"))

SWAGGER_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Allotment API</title>
<link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
<link rel="icon" href="{ASSETS}/favicon.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS}/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"""

SWAGGER_INIT = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  persistAuthorization: false,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""

REDOC_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Allotment API</title>
<link rel="icon" href="{ASSETS}/favicon.png">
</head>
<body>
<redoc spec-url="/openapi.json"></redoc>
<script src="{ASSETS}/redoc.standalone.js"></script>
</body>
</html>
"""

NO_CACHE = {"Cache-Control": "no-cache"}


def install(app: FastAPI) -> None:
    """Serve /docs, /redoc and their assets from `app` (create the app with docs_url=None, redoc_url=None)."""

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return HTMLResponse(SWAGGER_PAGE, headers=NO_CACHE)

    @app.get("/docs/init.js", include_in_schema=False)
    def swagger_init() -> Response:
        return Response(SWAGGER_INIT, media_type="text/javascript", headers=NO_CACHE)

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return HTMLResponse(REDOC_PAGE, headers=NO_CACHE)

    app.mount(ASSETS, StaticFiles(directory=BUNDLES), name="docs-assets")
