"""The HTTP API: a FastAPI application over the service layer, with bearer-token authentication.

Owns: the application factory (`create_app`), the thin routers (jobs, sessions, budgets, plans, nodes, reports,
auth, health), request and error schemas, the mapping of service errors to HTTP statuses, and `attach_api`, which
serves the API next to a running engine (sharing its database sessions and wake event).

Must not: hold business rules or rights (the service layer does) or write scheduling state (the engine does).
"""

from allotment.api.app import create_app
from allotment.api.serve import ApiServer, attach_api

__all__ = ["ApiServer", "attach_api", "create_app"]
