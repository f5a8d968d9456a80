"""Signing in to a remote MCP server (OAuth) from the console, as `kiwi mcp login` does from a
terminal, with the console's own callback route as the redirect URI.

`Sign in` (a POST, its CSRF token checked) starts the SDK's OAuth flow in a task of this
process, acting as the person (runner/mcp_client/oauth/login.py `sign_in`: discovery,
registration, PKCE). When the flow wants a person at a browser, the page sends the person's
browser to the authorization URL. The authorization server redirects back to
`/console/servers/<server>/callback?code=...&state=...`; the callback finds the sign-in by its
`state` (the SDK checks it again), checks that the same browser started it (a random nonce in an
HttpOnly, SameSite=Lax cookie: the redirect is a cross-site navigation, which carries no
SameSite=Strict cookie), and hands the code to the waiting flow, which exchanges it and stores
the tokens as the person's, encrypted, in the same per-user storage `kiwi mcp login` uses.

A sign-in lives in this process for at most `TIMEOUT_S` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, urlsplit

from mcp.shared.auth import AuthorizationCodeResult
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...errors import KiwiError
from ...harness.run import runner_environ
from ...mcp_client.oauth.crypto import cipher_from
from ...mcp_client.oauth.login import LoginFailed, LoginResult, sign_in, signs_in
from ...mcp_client.oauth.provider import storage_key
from ...mcp_client.oauth.storage import DatabaseTokenStorage
from ...principal import Principal
from ..signin import _secure

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["NONCE_COOKIE", "PAGES", "callback_routes"]

NONCE_COOKIE = "kiwi_console_oauth"
TIMEOUT_S = 300.0
URL_WAIT_S = 30.0
EXCHANGE_WAIT_S = 60.0
MAX_PENDING = 256


@dataclass
class Pending:
    """One sign-in waiting for its callback."""

    server: str
    user: str
    nonce_sha256: str
    task: asyncio.Task[LoginResult]
    code: asyncio.Future[AuthorizationCodeResult]
    started: float = field(default_factory=time.monotonic)


_pending: dict[str, Pending] = {}  # by OAuth state


def _forget_stale() -> None:
    now = time.monotonic()
    for state, p in list(_pending.items()):
        if p.task.done() or now - p.started > TIMEOUT_S or len(_pending) > MAX_PENDING:
            _pending.pop(state, None)
            p.task.cancel()


def _callback_uri(request: Request, server: str) -> str:
    from ..base import base_path

    path = f"{base_path(request)}/servers/{quote(server, safe='/')}/callback"
    return str(request.url.replace(path=path, query=None, fragment=None))


async def start(console: Console, request: Request, principal: Principal) -> Response:
    """POST /servers/<server>/signin: start the flow; send the browser to the authorization URL."""
    from ..base import base_path

    server = str(request.path_params["ref"])
    if principal.user_id is None:
        return console.error(request, 400, "sign-ins are kept per user, and you are signed in as no user", None)
    environ = runner_environ()
    spec, cfg = await signs_in(console.registry, server, environ)
    storage = DatabaseTokenStorage(console.registry, storage_key(cfg, spec.url or ""), cipher_from(environ))
    loop = asyncio.get_running_loop()
    authorization: asyncio.Future[str] = loop.create_future()
    code: asyncio.Future[AuthorizationCodeResult] = loop.create_future()

    async def redirect(url: str) -> None:
        if not authorization.done():
            authorization.set_result(url)

    async def callback() -> AuthorizationCodeResult:
        return await code

    redirect_uri = _callback_uri(request, spec.ref)
    # the task copies this context: it acts as the person (the guard's acting_as)
    task = loop.create_task(sign_in(spec, cfg, storage, redirect_uri, redirect, callback, False, TIMEOUT_S))
    waiting: set[asyncio.Future[object]] = {task, authorization}  # type: ignore[arg-type]
    done, _ = await asyncio.wait(waiting, timeout=URL_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
    if authorization not in done:
        if task in done:
            task.result()  # a KiwiError is the guard's error page
            return console.render(
                request, "notice.html", who=principal.describe(), title="Signed in",
                message=f"You are already signed in to {spec.ref}: the stored token is still good.",
                next_url=f"{base_path(request)}/servers",
            )  # fmt: skip
        task.cancel()
        raise LoginFailed(f"{spec.ref}'s authorization server did not answer within {URL_WAIT_S:g} s")
    url = authorization.result()
    state = (parse_qs(urlsplit(url).query).get("state") or [""])[0]
    if not state:
        task.cancel()
        raise LoginFailed(f"the authorization URL for {spec.ref} carries no state")
    nonce = secrets.token_hex(32)
    _forget_stale()
    _pending[state] = Pending(spec.ref, principal.user_id, hashlib.sha256(nonce.encode()).hexdigest(), task, code)
    # a page, not a redirect: CSP form-action forbids a form's answer redirecting to another site
    response = console.render(
        request, "notice.html", who=principal.describe(), title=f"Sign in to {spec.ref}",
        message=f"Continue to {urlsplit(url).netloc} to sign in to {spec.ref}.", next_url=url, refresh=True,
    )  # fmt: skip
    response.set_cookie(
        NONCE_COOKIE,
        nonce,
        max_age=int(TIMEOUT_S),
        path=f"{base_path(request) or ''}/servers",
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )
    return response


def callback_routes(console: Console) -> list[Route]:
    """The callback: open (the authorization server's redirect carries no SameSite=Strict
    session cookie), bound to the sign-in by its state and to the browser by the nonce cookie."""
    from ..base import base_path

    async def callback(request: Request) -> Response:
        server = str(request.path_params["ref"])
        query = request.query_params
        pending = _pending.get(query.get("state") or "")
        if pending is None or pending.server != server:
            return console.error(
                request, 400, "this sign-in is unknown or has expired", "start again from the MCP servers page"
            )
        nonce = request.cookies.get(NONCE_COOKIE) or ""
        if not hmac.compare_digest(hashlib.sha256(nonce.encode()).hexdigest(), pending.nonce_sha256):
            return console.error(
                request, 403, "this sign-in was started in another browser", "start again from the MCP servers page"
            )
        who = console.signin.principal(request)
        if who is not None and who.user_id != pending.user:
            return console.error(request, 403, "this sign-in was started by another person", None)
        _pending.pop(query["state"], None)
        if query.get("error"):
            why = query.get("error_description") or query["error"]
            pending.code.set_exception(LoginFailed(f"the authorization server refused the sign-in: {why}"))
        elif not query.get("code"):
            pending.code.set_exception(LoginFailed("the redirect carried no authorization code"))
        else:
            pending.code.set_result(
                AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
            )
        try:
            result = await asyncio.wait_for(pending.task, EXCHANGE_WAIT_S)
        except KiwiError as e:
            response = console.error(request, 403 if isinstance(e, LoginFailed) else 502, e.message, e.hint)
        except TimeoutError:
            response = console.error(request, 504, f"signing in to {server} did not finish", "try again")
        else:
            response = console.render(
                request, "notice.html", who=None, title="Signed in",
                message=f"You are signed in to {result.server}; it lists {result.tools} tools.",
                next_url=f"{base_path(request)}/servers", refresh=True,
            )  # fmt: skip
        response.delete_cookie(NONCE_COOKIE, path=f"{base_path(request) or ''}/servers", httponly=True, samesite="lax")
        return response

    return [Route("/servers/{ref:path}/callback", endpoint=callback, methods=["GET"])]


async def aclose() -> None:
    """Cancel the sign-ins still waiting (the console is closing)."""
    for p in list(_pending.values()):
        p.task.cancel()
        with contextlib.suppress(BaseException):
            await p.task
    _pending.clear()


PAGES = [("/servers/{ref:path}/signin", start, ("POST",))]
