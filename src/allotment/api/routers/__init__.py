"""The API's routers, one per resource; each handler parses the request, calls one use case and returns its view."""
