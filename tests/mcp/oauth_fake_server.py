"""A FAKE OAuth 2.1 authorization server in front of a real MCP server, for the OAuth tests.

One local HTTP server (uvicorn, in a thread, on a port of 18500-18599) that is both:

* a fake authorization server: RFC 8414 metadata, dynamic client registration (RFC 7591),
  /authorize that approves at once and redirects with a code (PKCE S256 checked), and /token
  for authorization_code, refresh_token and client_credentials (client_secret_basic), with
  short-lived access tokens so refresh can be seen;
* a protected MCP resource: the official SDK's MCP server (streamable HTTP at /mcp, and the
  older SSE transport at /sse with its messages at /messages/) behind a bearer check that
  answers 401 with WWW-Authenticate naming its protected resource metadata (RFC 9728), as
  hosted MCP servers do.

Its tool `whoami` answers the subject of the token it was called with, and `echo` echoes.
`FakeAuthServer.log` keeps every grant, and `tokens` every token issued, for assertions.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import secrets
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from tests.serve_in_thread import serving

PORTS = range(18500, 18600)
_subject: contextvars.ContextVar[str] = contextvars.ContextVar("subject", default="?")


@dataclass
class FakeAuthServer:
    base: str = ""
    access_ttl_s: int = 3600
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)  # client_id -> registration
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)  # access token -> grant
    refresh: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)  # "register", "authorize", "authorization_code", ...
    issued: list[str] = field(default_factory=list)  # every access and refresh token ever issued
    next_subject: str = "person-1"  # whom /authorize signs in (a fake has no login page)

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def sse_url(self) -> str:
        return f"{self.base}/sse"

    def add_client(self, client_id: str, secret: str) -> None:
        self.clients[client_id] = {"client_id": client_id, "client_secret": secret}

    # -- authorization server ---------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "registration_endpoint": f"{self.base}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            "scopes_supported": ["tools"],
        }

    async def register(self, request: Request) -> Response:
        body = await request.json()
        client_id = "dyn-" + secrets.token_hex(4)
        self.clients[client_id] = {**body, "client_id": client_id, "token_endpoint_auth_method": "none"}
        self.log.append("register")
        return JSONResponse(self.clients[client_id], status_code=201)

    async def authorize(self, request: Request) -> Response:
        q = request.query_params
        client = self.clients.get(q.get("client_id", ""))
        if client is None or q.get("redirect_uri") not in client.get("redirect_uris", []):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "client_id": client["client_id"],
            "challenge": q.get("code_challenge"),
            "scope": q.get("scope"),
        }
        self.log.append("authorize")
        query = {"code": code, "state": q.get("state", "")}
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode(query)}", status_code=302)

    async def token(self, request: Request) -> Response:
        form = dict(await request.form())
        grant = form.get("grant_type")
        self.log.append(str(grant))
        if grant == "authorization_code":
            code = self.codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier", ""))
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if code is None or code["challenge"] != digest:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return self._issue(code["client_id"], self.next_subject, code["scope"], with_refresh=True)
        if grant == "refresh_token":
            held = self.refresh.pop(str(form.get("refresh_token")), None)
            if held is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return self._issue(held["client_id"], held["subject"], held["scope"], with_refresh=True)
        if grant == "client_credentials":
            client_id, secret = _basic(request)
            known = self.clients.get(client_id)
            if known is None or known.get("client_secret") != secret:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            return self._issue(client_id, f"client:{client_id}", form.get("scope"), with_refresh=False)
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    def _issue(self, client_id: str, subject: str, scope: Any, *, with_refresh: bool) -> Response:
        access = "at-" + secrets.token_urlsafe(24)
        grant = {
            "client_id": client_id,
            "subject": subject,
            "scope": scope,
            "expires_at": time.time() + self.access_ttl_s,
        }
        self.tokens[access] = grant
        self.issued.append(access)
        body: dict[str, Any] = {"access_token": access, "token_type": "Bearer", "expires_in": self.access_ttl_s}
        if with_refresh:
            refresh = "rt-" + secrets.token_urlsafe(24)
            self.refresh[refresh] = grant
            self.issued.append(refresh)
            body["refresh_token"] = refresh
        return JSONResponse(body)

    # -- protected resource --------------------------------------------------------------

    def prm(self, resource: str | None = None) -> dict[str, Any]:
        return {
            "resource": resource or self.mcp_url,
            "authorization_servers": [self.base],
            "scopes_supported": ["tools"],
        }

    def bearer(self, headers: dict[str, str]) -> str | None:
        """The subject of a live bearer token, else None."""
        value = headers.get("authorization", "")
        grant = self.tokens.get(value[7:]) if value.startswith("Bearer ") else None
        return grant["subject"] if grant is not None and grant["expires_at"] > time.time() else None


def _basic(request: Request) -> tuple[str, str]:
    value = request.headers.get("authorization", "")
    if not value.startswith("Basic "):
        return "", ""
    client_id, _, secret = base64.b64decode(value[6:]).decode().partition(":")
    return client_id, secret


def _mcp_apps() -> tuple[Any, Any]:
    """The same server over streamable HTTP (/mcp) and over SSE (/sse, /messages/)."""
    server = MCPServer("oauth-fake-protected")

    @server.tool()
    def whoami() -> str:
        """The subject of the caller's token."""
        return _subject.get()

    @server.tool()
    def echo(message: str) -> str:
        """Echo."""
        return f"Echo: {message}"

    return server.streamable_http_app(stateless_http=True, json_response=True), server.sse_app()


def _asgi(fake: FakeAuthServer) -> Any:
    mcp, sse = _mcp_apps()
    routes = {
        ("GET", "/.well-known/oauth-authorization-server"): lambda r: JSONResponse(fake.metadata()),
        ("GET", "/.well-known/oauth-protected-resource/mcp"): lambda r: JSONResponse(fake.prm()),
        ("GET", "/.well-known/oauth-protected-resource/sse"): lambda r: JSONResponse(fake.prm(fake.sse_url)),
        ("GET", "/.well-known/oauth-protected-resource"): lambda r: JSONResponse(fake.prm()),
    }
    handlers = {
        ("POST", "/register"): fake.register,
        ("GET", "/authorize"): fake.authorize,
        ("POST", "/token"): fake.token,
    }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await mcp(scope, receive, send)
        key = (scope["method"], scope["path"])
        request = Request(scope, receive)
        if key in routes:
            return await routes[key](request)(scope, receive, send)
        if key in handlers:
            return await (await handlers[key](request))(scope, receive, send)
        over_sse = scope["path"].startswith(("/sse", "/messages/"))
        subject = fake.bearer({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        if subject is None:
            metadata = f"{fake.base}/.well-known/oauth-protected-resource/{'sse' if over_sse else 'mcp'}"
            challenge = f'Bearer resource_metadata="{metadata}"'
            return await JSONResponse({"error": "invalid_token"}, 401, {"WWW-Authenticate": challenge})(
                scope, receive, send
            )
        _subject.set(subject)  # over SSE, the tools run in the GET /sse stream's context: its token
        return await (sse if over_sse else mcp)(scope, receive, send)

    return app


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 18500-18599")


@contextmanager
def fake_oauth_server(**options: Any) -> Iterator[FakeAuthServer]:
    """The fake, listening, until the block ends."""
    port = _free_port()
    fake = FakeAuthServer(base=f"http://127.0.0.1:{port}", **options)
    with serving(_asgi(fake), port, what="the fake OAuth server", lifespan="on"):
        yield fake
