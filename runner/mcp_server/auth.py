"""Bearer authentication for `kiwi serve --transport http`: every request names its caller.

The HTTP endpoint is an OAuth 2.0 resource server, as the MCP authorization specification
asks. Each request to /mcp carries `Authorization: Bearer <access token>`, a Supabase Auth
JWT verified with `runner.principal.from_token` (the project's JWT secret, HS256; or a key
of the project's JWKS when hosted).

Where the project names an authorization server (its Supabase Auth: SUPABASE_URL, or
KIWI_AUTH_ISSUER), a request without a token is answered 401 with
`WWW-Authenticate: Bearer ... resource_metadata="<metadata URL>"`; the metadata (RFC 9728,
served without authentication at /.well-known/oauth-protected-resource/mcp and at
/.well-known/oauth-protected-resource) names it, and an MCP client signs its user in there.
The local stack runs no authorization server, so there the server claims none: no metadata
(404, saying why), and the 401 says where a token comes from (`kiwi token`), rather than
sending clients to sign in at an address where nothing answers.

Expired, forged and malformed tokens are 401 with an `error_description` saying why, and so
are a user's tokens for another audience or of a longer life than the server accepts
(KIWI_JWT_AUDIENCE, KIWI_JWT_MAX_LIFETIME; runner/principal.py). A
service-role token (the project's service key) is accepted only by a server started with
`--admin`; otherwise it is refused like a bad token, saying so.

The SDK's machinery does the work: `BearerAuthBackend` (here only made to say why a token
was refused), `AuthContextMiddleware` (the verified token for the rest of the request, which
the SDK carries into the tool call), and `create_protected_resource_routes` (the metadata);
`_TokenRequired` answers the 401 of a request without one, as the SDK's
`RequireAuthMiddleware` would, saying where a token comes from.
`acting_as_caller()` then makes the verified principal the one the registry acts as.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl, ConfigDict
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationError
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import DEFAULT_MAX_SESSIONS_PER_USER, DEFAULT_SESSION_IDLE_S, Settings
from ..errors import KiwiError, Refused, UsageError
from ..principal import DEFAULT_AUDIENCE, DEFAULT_MAX_LIFETIME_S, Principal, acting_as, from_token
from .http_protocol import ProtocolChecks
from .http_sessions import SessionLimits, sessions_app

__all__ = [
    "METADATA_PATH",
    "HttpAuth",
    "KiwiAccessToken",
    "SupabaseTokenVerifier",
    "acting_as_caller",
    "http_app",
    "http_auth",
    "is_loopback",
    "public_url",
    "request_principal",
]

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class KiwiAccessToken(AccessToken):
    """The SDK's access token, carrying the principal it was verified as."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    principal: Principal


class SupabaseTokenVerifier:
    """A `TokenVerifier` (the MCP SDK's protocol) for the project's Supabase Auth JWTs.

    `verify_token` answers None for any token it refuses, as the protocol asks;
    `authenticate` raises the reason instead (a Refused or UsageError), so that the 401
    can say it. `allow_admin` accepts service-role tokens (`kiwi serve --admin`)."""

    def __init__(
        self,
        *,
        secret: str | None,
        jwks_url: str | None = None,
        allow_admin: bool = False,
        audience: str | None = DEFAULT_AUDIENCE,
        max_lifetime_s: float | None = DEFAULT_MAX_LIFETIME_S,
    ) -> None:
        if not secret and not jwks_url:
            raise UsageError(
                "cannot verify bearer tokens: neither a JWT secret nor a JWKS URL is configured",
                hint="set KIWI_JWT_SECRET (the project's JWT secret), or SUPABASE_URL / KIWI_JWKS_URL "
                "for a project that signs with asymmetric keys",
            )
        self.secret = secret
        self.jwks_url = jwks_url
        self.allow_admin = allow_admin
        self.audience = audience
        self.max_lifetime_s = max_lifetime_s

    async def authenticate(self, token: str) -> KiwiAccessToken:
        """The verified token and its principal; raises why a token is refused."""

        def verify() -> Principal:
            return from_token(
                token,
                secret=self.secret,
                jwks_url=self.jwks_url,
                audience=self.audience,
                max_lifetime_s=self.max_lifetime_s,
            )

        # fetching the project's JWKS blocks (once per key, then cached): keep it off the event loop
        principal = await anyio.to_thread.run_sync(verify) if self.jwks_url else verify()
        if principal.is_admin and not self.allow_admin:
            raise Refused(
                "service-role tokens are refused: this server was not started with --admin",
                hint="sign in as a user (Supabase Auth) for an access token, or start the server "
                "with `kiwi serve --transport http --admin` to accept the project's service key",
            )
        claims = dict(principal.claims)
        scope = claims.get("scope")
        return KiwiAccessToken(
            token=principal.token or token,
            client_id=str(claims.get("client_id") or "supabase-auth"),
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=int(claims["exp"]) if isinstance(claims.get("exp"), (int, float)) else None,
            subject=principal.user_id,
            claims=claims,
            principal=principal,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            return await self.authenticate(token)
        except KiwiError:
            return None


class _RefusedToken(AuthenticationError):
    def __init__(self, message: str, hint: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class _BearerBackend(BearerAuthBackend):
    """The SDK's bearer backend, saying why a token was refused (the SDK's answers every bad
    token with the same "Authentication required"). A request without a token is left to
    `_TokenRequired`, whose 401 says where to get one; the metadata needs no token."""

    token_verifier: SupabaseTokenVerifier

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        if conn.scope["path"].startswith(METADATA_PATH):  # (conn.url would build the whole URL)
            return None
        header = conn.headers.get("authorization")
        if not header:
            return None
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _RefusedToken(
                "the Authorization header is not `Bearer <access token>`",
                "send the access token as `Authorization: Bearer <token>`",
            )
        try:
            info = await self.token_verifier.authenticate(token.strip())
        except KiwiError as e:
            raise _RefusedToken(e.message, e.hint) from None
        return AuthCredentials(info.scopes), AuthenticatedUser(info)


def _header_text(text: str) -> str:
    """Text a quoted WWW-Authenticate parameter may hold (RFC 6750 §3: no `"` or `\\`, ASCII)."""
    return re.sub(r"[^\x20-\x21\x23-\x5b\x5d-\x7e]", "'", text.replace('"', "'"))[:300]


# What a client without a token is told where no authorization server is named (the local stack)
LOCAL_TOKEN_HINT = (
    "run `kiwi token` where this server runs (it prints an access token) and send it as "
    "`Authorization: Bearer <token>`; this server names no authorization server to sign in at"
)


@dataclass(frozen=True)
class HttpAuth:
    """How the HTTP endpoint authenticates: this resource's URL, the authorization server that
    issues its tokens (None on the local stack, which runs none), and the verifier of its tokens."""

    resource_url: AnyHttpUrl
    issuer_url: AnyHttpUrl | None
    verifier: SupabaseTokenVerifier

    @property
    def issuer(self) -> str | None:
        return str(self.issuer_url) if self.issuer_url is not None else None

    @property
    def resource(self) -> str:
        return str(self.resource_url)

    @property
    def metadata_url(self) -> str | None:
        """The protected resource metadata's URL; None when there is none to serve (no issuer)."""
        if self.issuer_url is None:
            return None
        return str(build_resource_metadata_url(self.resource_url))

    def challenge(self, error: str, message: str, hint: str | None) -> Response:
        """A 401: RFC 6750's `error`, why, and where to get a token (the metadata, or `kiwi token`)."""
        parts = [f'error="{error}"', f'error_description="{_header_text(message)}"']
        if self.metadata_url is not None:
            parts.append(f'resource_metadata="{self.metadata_url}"')
        return JSONResponse(
            {"error": error, "error_description": message, "hint": hint},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer " + ", ".join(parts)},
        )

    def missing(self) -> Response:
        """The 401 of a request without a token."""
        if self.issuer is None:
            message = "a bearer token is required: `kiwi token` prints one"
            return self.challenge("invalid_token", message, LOCAL_TOKEN_HINT)
        return self.challenge(
            "invalid_token",
            f"a bearer token is required: an access token of {self.issuer}",
            "sign in there (this server's protected resource metadata names it) and send the access "
            "token as `Authorization: Bearer <token>`",
        )

    def refusal(self, conn: HTTPConnection, exc: AuthenticationError) -> Response:
        """The 401 for a refused token: RFC 6750's `invalid_token`, why, and where to sign in."""
        message = exc.message if isinstance(exc, _RefusedToken) else str(exc)
        hint = exc.hint if isinstance(exc, _RefusedToken) else None
        return self.challenge("invalid_token", message, hint)


class _TokenRequired:
    """The MCP endpoint behind a verified token: a request the bearer backend did not
    authenticate is answered `auth.missing()`, a 401 saying where a token comes from."""

    def __init__(self, app: ASGIApp, auth: HttpAuth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await self.auth.missing()(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})


async def _no_metadata(request: HTTPConnection) -> Response:
    """The metadata's URLs where there is none: 404, saying where tokens come from instead."""
    return JSONResponse(
        {
            "error": "not_found",
            "error_description": "this server names no authorization server, so it has no protected resource metadata",
            "hint": LOCAL_TOKEN_HINT,
        },
        status_code=404,
    )


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def public_url(host: str, port: int, explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The URL clients reach the MCP endpoint at (the protected resource): --public-url, else
    KIWI_PUBLIC_URL, else http://HOST:PORT/mcp."""
    env = os.environ if environ is None else environ
    url = (explicit or env.get("KIWI_PUBLIC_URL") or "").strip()
    if not url:
        netloc = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{netloc}:{port}{MCP_PATH}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(
            f"not a public URL for the MCP endpoint: {url!r}",
            hint="give the absolute URL clients use, e.g. --public-url https://kiwi.example.com/mcp",
        )
    return url.rstrip("/") if parts.path not in ("", "/") else url.rstrip("/") + MCP_PATH


def http_auth(
    settings: Settings,
    resource_url: str,
    *,
    allow_admin: bool = False,
    environ: Mapping[str, str] | None = None,
) -> HttpAuth:
    """The endpoint's authentication from the runner's Settings (the JWT secret, the JWKS URL)
    and the environment (KIWI_AUTH_ISSUER, SUPABASE_URL)."""
    issuer = settings.auth_issuer(environ)
    try:
        resource = AnyHttpUrl(resource_url)
        issuer_url = AnyHttpUrl(issuer) if issuer is not None else None
    except ValueError as e:
        raise UsageError(
            f"not a usable authorization server or resource URL ({issuer!r}, {resource_url!r}): {e}",
            hint="KIWI_AUTH_ISSUER is the project's Supabase Auth URL, e.g. https://<ref>.supabase.co/auth/v1",
        ) from None
    verifier = SupabaseTokenVerifier(
        secret=settings.jwt_secret,
        jwks_url=settings.jwks_url,
        allow_admin=allow_admin,
        audience=settings.jwt_audience,
        max_lifetime_s=settings.jwt_max_lifetime_s,
    )
    return HttpAuth(resource, issuer_url, verifier)


def _transport_security(host: str, resource_url: str) -> TransportSecuritySettings | None:
    """The SDK's DNS-rebinding guard for a loopback server (its own default), also allowing the
    public URL's host when the server is reached through a proxy under another name."""
    if not is_loopback(host):
        return None
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    parts = urlsplit(resource_url)
    if parts.hostname and not is_loopback(parts.hostname):
        hosts.append(parts.netloc)
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _lifespan_of(inner: Starlette) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The outer app's lifespan: the inner app's (its session manager's), which yields no state."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with inner.router.lifespan_context(inner):
            yield

    return lifespan


def http_app(
    server: MCPServer,
    *,
    host: str,
    resource_url: str,
    auth: HttpAuth | None,
    limits: SessionLimits | None = None,
    session_prefix: str = "",
) -> Starlette:
    """The ASGI app of the streamable HTTP endpoint at /mcp: with `auth`, every request needs a
    token it accepts, and the protected resource metadata is served; without (only
    `--insecure-no-auth` on loopback), anyone who can connect is served. Its MCP sessions
    expire when idle and are capped per caller (`limits`, default Settings' defaults;
    http_sessions.py)."""
    limits = limits or SessionLimits(DEFAULT_SESSION_IDLE_S, DEFAULT_MAX_SESSIONS_PER_USER)
    security = _transport_security(host, resource_url)
    inner = sessions_app(
        server, path=MCP_PATH, limits=limits, transport_security=security, session_prefix=session_prefix
    )
    checked = ProtocolChecks(inner, path=MCP_PATH)  # the protocol errors the SDK answers otherwise
    if auth is None:
        return Starlette(routes=[Mount("/", app=checked)], lifespan=_lifespan_of(inner))
    routes: list[Route | Mount] = []
    if auth.issuer_url is not None:
        metadata_routes = create_protected_resource_routes(
            resource_url=auth.resource_url,
            authorization_servers=[auth.issuer_url],
            resource_name="Kiwi tool registry",
        )
        routes.extend(metadata_routes)
        if metadata_routes[0].path != METADATA_PATH:
            # clients that do not insert the resource's path look here (RFC 9728 §3 without a path)
            routes.append(Route(METADATA_PATH, endpoint=metadata_routes[0].endpoint, methods=["GET", "OPTIONS"]))
    else:
        routes.append(Route(METADATA_PATH, endpoint=_no_metadata, methods=["GET"]))
        routes.append(Route(METADATA_PATH + "/{rest:path}", endpoint=_no_metadata, methods=["GET"]))
    routes.append(Mount("/", app=_TokenRequired(checked, auth)))
    # the backend checks no resource binding: Supabase Auth binds no token to a resource (no RFC
    # 8707 indicators), so the verifier accepts what the project signed, as every Supabase API does
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(AuthenticationMiddleware, backend=_BearerBackend(auth.verifier), on_error=auth.refusal),
            Middleware(AuthContextMiddleware),
        ],
        lifespan=_lifespan_of(inner),
    )


def request_principal() -> Principal | None:
    """The verified principal of the HTTP request being served, if it carries one."""
    token = get_access_token()
    if token is None:
        return None
    if not isinstance(token, KiwiAccessToken):
        raise Refused("the request's access token carries no Kiwi principal", hint="this is a bug in Kiwi's server")
    return token.principal


@contextlib.contextmanager
def acting_as_caller() -> Iterator[Principal | None]:
    """Within the block the registry acts as the HTTP request's verified caller; without one
    (stdio, `--insecure-no-auth`) the process's own principal applies, untouched."""
    principal = request_principal()
    if principal is None:
        yield None
        return
    with acting_as(principal):
        yield principal
