"""The web dashboard: a single page served by the API server at `/`, drawing everything from the HTTP API with the
user's bearer token (kept in the browser's local storage after the login page), like any other client.

Owns: the page routes (`/` and the static assets under `/ui/`), the HTML shell, the scripts that render the pages
(static/lib.js: the API client and DOM builders; pages.js: overview, budget tree, a budget with its burn-down chart,
queue with reasons, fleet map, job timeline, simulation reports; app.js: login, routing, refresh) and their style.

Must not: read the database or hold rules: every figure comes from the API (`allotment.api`), and every action
(cancel, drain) goes through it, so the API's rights apply unchanged.
"""

from allotment.web.routes import mount

__all__ = ["mount"]
