"""`kiwi mcp login SERVER`: sign the caller in to a remote MCP server, once, and keep the tokens.

A loopback listener (RFC 8252: http://127.0.0.1:PORT/callback) takes the authorization
server's redirect; the authorization URL is printed and, where a desktop browser exists,
opened (never required: the URL works from any browser on this machine). The SDK's provider
does the rest (discovery, registration, PKCE, the code exchange), and its storage keeps the
tokens for this user, encrypted (storage.py). Runs later refresh them by themselves.

The port: config.auth.redirect_port, else the one the stored registration was made for (a
dynamically registered client keeps its redirect URI), else any free one, registering anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import TokenStorage
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

from ...errors import KiwiError, Refused, UsageError
from ..pool import ServerSpec
from ..servers import server_spec
from .config import OAuthConfig, oauth_config
from .crypto import cipher_from
from .provider import make_provider, storage_key
from .storage import DatabaseTokenStorage

if TYPE_CHECKING:
    from ...registry.base import Registry

__all__ = ["LoginFailed", "LoginResult", "LoopbackListener", "login", "sign_in", "signs_in"]

CALLBACK_PATH = "/callback"
DEFAULT_TIMEOUT_S = 300.0
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>Kiwi</title>"
    "<p>{text}</p><p>You can close this tab and return to the terminal.</p>"
)


class LoginFailed(Refused):
    """Signing in did not complete: denied, timed out, or the server refused the exchange."""

    kind = "login_failed"


@dataclass(frozen=True)
class LoginResult:
    server: str
    resource: str
    signed_in: bool  # False: a stored token was still good, nobody was sent to a browser
    tools: int


class LoopbackListener:
    """One redirect, caught on 127.0.0.1. `redirect_uri` once started; `wait()` gives the code."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._server: asyncio.Server | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def __aenter__(self) -> LoopbackListener:
        self._result = asyncio.get_running_loop().create_future()
        try:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        except OSError as exc:
            raise LoginFailed(
                f"cannot listen on 127.0.0.1:{self.port} for the sign-in redirect: {exc.strerror}",
                hint="free that port, or set config.auth.redirect_port to another",
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def wait(self) -> AuthorizationCodeResult:
        assert self._result is not None, "use the listener as an async context manager"
        return await asyncio.shield(self._result)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            with anyio.fail_after(10):
                request_line = (await reader.readline()).decode("latin-1")
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            status, text = self._take(request_line)
            body = _PAGE.format(text=text).encode()
            head = f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)
            await writer.drain()
        except (OSError, TimeoutError, UnicodeDecodeError):
            pass
        finally:
            writer.close()

    def _take(self, request_line: str) -> tuple[str, str]:
        parts = request_line.split()
        if len(parts) < 2 or parts[0] != "GET":
            return "405 Method Not Allowed", "Kiwi expected the sign-in redirect here."
        target = urlsplit(parts[1])
        if target.path != CALLBACK_PATH:
            return "404 Not Found", "Not the sign-in redirect."
        query = {k: v[0] for k, v in parse_qs(target.query).items()}
        assert self._result is not None
        if self._result.done():
            return "200 OK", "Kiwi already has this sign-in."
        if "error" in query:
            why = query.get("error_description") or query["error"]
            self._result.set_exception(LoginFailed(f"the authorization server refused the sign-in: {why}"))
            return "400 Bad Request", "Signing in failed."
        if not query.get("code"):
            return "400 Bad Request", "The redirect carried no authorization code."
        self._result.set_result(
            AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
        )
        return "200 OK", "Kiwi is signed in."


async def login(
    registry: Registry,
    server: str,
    environ: Mapping[str, str],
    *,
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    open_browser: bool = True,
    force: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> LoginResult:
    """Sign the registry's caller in to `server` (an mcp_server's tool id) and store the tokens."""
    spec, cfg = await signs_in(registry, server, environ)
    storage = DatabaseTokenStorage(registry, storage_key(cfg, spec.url or ""), cipher_from(environ))
    port = cfg.redirect_port if cfg.redirect_port is not None else await _registered_port(storage, cfg)
    try:
        async with _listening(port) as listener:

            async def redirect(authorization_url: str) -> None:
                say(f"kiwi: sign in to {spec.ref} at:\n\n  {authorization_url}\n")
                if open_browser and _has_browser():
                    with contextlib.suppress(webbrowser.Error, OSError):
                        await asyncio.to_thread(webbrowser.open, authorization_url)
                say(f"kiwi: waiting for the redirect to {listener.redirect_uri} (up to {timeout_s:g} s)")

            return await sign_in(spec, cfg, storage, listener.redirect_uri, redirect, listener.wait, force, timeout_s)
    except TimeoutError:
        raise LoginFailed(f"signing in to {spec.ref} did not finish within {timeout_s:g} s") from None


async def signs_in(registry: Registry, server: str, environ: Mapping[str, str]) -> tuple[ServerSpec, OAuthConfig]:
    """The server's spec and OAuth config; a UsageError when there is nothing to sign in to."""
    plan = await registry.plan(server)  # NotFound names a bad server
    spec = server_spec(plan, environ)
    cfg = oauth_config(plan.config, environ, spec.ref)
    if spec.transport == "stdio" or spec.url is None:
        raise UsageError(f"{spec.ref} is a stdio MCP server: there is nothing to sign in to")
    if cfg is None:
        raise UsageError(
            f"{spec.ref} does not ask for OAuth (its config has no auth block)",
            hint="add `auth: {type: oauth}` to the mcp_server's config, or send static headers",
        )
    return spec, cfg


@contextlib.asynccontextmanager
async def _listening(port: int) -> AsyncIterator[LoopbackListener]:
    """The listener on `port`, else (a remembered port now taken) on any free one."""
    try:
        listener = LoopbackListener(port)
        await listener.__aenter__()
    except LoginFailed:
        if port == 0:
            raise
        listener = LoopbackListener(0)
        await listener.__aenter__()
    try:
        yield listener
    finally:
        await listener.__aexit__(None, None, None)


async def sign_in(
    spec: ServerSpec,
    cfg: OAuthConfig,
    storage: DatabaseTokenStorage,
    redirect_uri: str,
    redirect: Callable[[str], Awaitable[None]],
    callback: Callable[[], Awaitable[AuthorizationCodeResult]],
    force: bool,
    timeout_s: float,
) -> LoginResult:
    """Connect through the SDK's provider, whose flow sends the person to `redirect` (the
    authorization URL) and takes the code from `callback`, at `redirect_uri`; the tokens are
    stored in `storage`. Used by `kiwi mcp login` (a loopback listener) and the console (its
    own callback route)."""
    sent = False

    async def redirecting(authorization_url: str) -> None:
        nonlocal sent
        sent = True
        await redirect(authorization_url)

    assert spec.url is not None
    view = _LoginStorage(storage, redirect_uri, force)
    provider = make_provider(
        cfg, spec.url, view, redirect_uri=redirect_uri, redirect_handler=redirecting, callback_handler=callback
    )
    with anyio.fail_after(timeout_s):
        tools = await _connect(spec, provider)
    if not view.stored:
        raise LoginFailed(f"{spec.ref} answered without asking anyone to sign in: no token was issued or stored")
    return LoginResult(server=spec.ref, resource=spec.url, signed_in=sent, tools=tools)


async def _connect(spec: ServerSpec, auth: httpx2.Auth) -> int:
    """Initialize a session through `auth` and count the tools: the proof the token works."""
    assert spec.url is not None
    try:
        async with contextlib.AsyncExitStack() as stack:
            if spec.transport == "sse":
                streams = await stack.enter_async_context(sse_client(spec.url, headers=dict(spec.headers), auth=auth))
            else:
                client = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=dict(spec.headers), auth=auth, timeout=httpx2.Timeout(30.0, read=300.0))
                )
                streams = await stack.enter_async_context(streamable_http_client(spec.url, http_client=client))
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            await session.initialize()
            return len((await session.list_tools()).tools)
    except Exception as exc:  # the transport's task group wraps what the auth flow raised
        inner = _innermost(exc)
        if isinstance(inner, KiwiError):
            raise inner from None
        raise LoginFailed(f"signing in to {spec.ref} failed: {inner or type(inner).__name__}") from None


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _LoginStorage:
    """The user's storage as login sees it: a registration made for another redirect URI is
    not offered (the server would refuse the redirect), nor, with --force, the tokens."""

    def __init__(self, inner: DatabaseTokenStorage, redirect_uri: str, force: bool) -> None:
        self.inner = inner
        self.redirect_uri = redirect_uri
        self.force = force
        self.stored = False

    async def get_tokens(self) -> OAuthToken | None:
        tokens = await self.inner.get_tokens()
        if tokens is not None and not self.force:
            self.stored = True  # still good, unless the server refuses it (then a new one is stored)
        return None if self.force else tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self.inner.set_tokens(tokens)
        self.stored = True

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = await self.inner.get_client_info()
        if info is None or info.redirect_uris is None:
            return info
        return info if self.redirect_uri in {str(u) for u in info.redirect_uris} else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self.inner.set_client_info(client_info)


async def _registered_port(storage: TokenStorage, cfg: OAuthConfig) -> int:
    """The loopback port the stored registration was made for, else 0 (any)."""
    if cfg.client_id or cfg.client_metadata_url:
        return 0
    info = await storage.get_client_info()
    for uri in (info.redirect_uris or []) if info is not None else []:
        parts = urlsplit(str(uri))
        if parts.hostname == "127.0.0.1" and parts.path == CALLBACK_PATH and parts.port:
            return parts.port
    return 0


def _has_browser() -> bool:
    """A desktop browser to open, not a terminal one that would take over this terminal."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


async def login_command(server: str, *, open_browser: bool, force: bool, timeout_s: float) -> int:
    """`kiwi mcp login SERVER` as the CLI's principal; the exit code (errors propagate as KiwiErrors)."""
    from ...config import Settings
    from ...harness.run import runner_environ
    from ...registry import connect

    if not server.strip():
        raise UsageError("kiwi mcp login needs the mcp_server's tool id")
    if timeout_s <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {timeout_s:g}")
    registry = connect(Settings.load())
    try:
        result = await login(
            registry, server, runner_environ(), open_browser=open_browser, force=force, timeout_s=timeout_s
        )
    finally:
        await registry.aclose()
    how = "signed in to" if result.signed_in else "already signed in to"
    print(f"kiwi: {how} {result.server} ({result.resource}); it lists {result.tools} tools", file=sys.stderr)
    return 0
