"""Web hardening of the HTTP server: which Host headers it answers, and the security headers of every response.

Owns: `is_loopback`, `allowed_hosts` (the default allowlist for a bound address: that address, the loopback names,
and for a wildcard bind this machine's names and their addresses), `host_of` (a Host header without its port), and
the pure-ASGI middleware `Harden`, which answers a request whose Host is not allowed with 400 in the standard error
shape — what defeats DNS rebinding, where a web page's script reaches a local server under a name the page's site
controls — and adds to every response `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`,
`X-Frame-Options: DENY` and a Content-Security-Policy: strict for the dashboard and the API (scripts only from this
server, no framing, no plugins), and one for the self-hosted API docs (/docs, /redoc) that lets their bundles use
inline styles and workers. A header the route set itself (a simulation report's sandbox policy) is kept.

Must not: authenticate or know the routes beyond the docs' paths.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK = ("localhost", "127.0.0.1", "::1")
WILDCARD = ("0.0.0.0", "::", "")
ANY = "*"

DASHBOARD_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""Inline styles are allowed: the dashboard sizes its bars with style attributes, and a simulation report shown in
its sandboxed srcdoc frame inherits this policy and carries its own <style>. Scripts never run inline."""
DOCS_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "worker-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")


def host_of(header: str) -> str:
    """The host of a Host header, lower case, without its port or an IPv6 address's brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine (localhost, 127.0.0.0/8, ::1)."""
    name = host_of(host) if host.startswith("[") else host.lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names a server bound to `bound` answers: `bound` itself, the loopback names and `extra` (a
    configured public name); a wildcard bind adds this machine's host name, fully qualified name and their
    addresses. "*" in `extra` allows any (never with open login: the caller refuses that)."""
    names = {host_of(h) if h != ANY else ANY for h in extra}
    names.update(LOOPBACK)
    if bound in WILDCARD:
        names.update(_machine_names())
    else:
        names.add(host_of(bound))
    return frozenset(names)


def _machine_names() -> set[str]:
    """This machine's host name, fully qualified name and the addresses they resolve to."""
    names = {n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n}
    for name in list(names):
        try:
            names.update(socket.gethostbyname_ex(name)[2])
        except OSError:
            continue
    return names


def _policy(path: str) -> bytes:
    docs = any(path == p or path.startswith(p + "/") for p in DOCS_PATHS)
    return (DOCS_CSP if docs else DASHBOARD_CSP).encode()


def _refusal(host: str) -> bytes:
    shown = host if len(host) <= 100 else host[:100] + "…"
    return json.dumps(
        {
            "error": "bad_request",
            "message": f"this server does not answer to the host {shown!r}: use its own address, or add the name "
            "with --allowed-host",
            "problems": [{"field": "Host", "reason": "not an allowed host name", "line": None}],
        }
    ).encode()


class Harden:
    """Refuse foreign Host headers (when `hosts` is given) and add the security headers to every response."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.hosts = None if hosts is None or ANY in hosts else hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = _policy(str(scope.get("path", "")))
        if self.hosts is not None:
            raw = next((v for k, v in scope.get("headers") or () if k == b"host"), b"")
            host = raw.decode("latin-1")
            if host_of(host) not in self.hosts:
                body = _refusal(host)
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            *_security_headers(policy, set()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                message["headers"] = headers + _security_headers(policy, present)
            await send(message)

        await self.app(scope, receive, sending)


def _security_headers(policy: bytes, present: set[bytes]) -> list[tuple[bytes, bytes]]:
    wanted = [
        (b"content-security-policy", policy),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
    ]
    return [(k, v) for k, v in wanted if k not in present]
