"""What every console page stands on: the Console, the guard every page passes, its headers.

Every page is a `View`: a coroutine of the `Console`, the request and the signed-in person. The
guard (`page`) sends a person not signed in to the sign-in form, refuses a POST whose CSRF
token does not match (403), runs the view inside `acting_as(principal)` so that every
registry call it makes is the person's own under RLS, and answers a KiwiError with an error
page saying what and why, never a traceback. Every answer carries a strict
Content-Security-Policy (scripts only from /console/static: no inline script, no eval).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import Settings
from ..errors import KiwiError, NotFound, Refused, UsageError
from ..principal import Principal, acting_as, anon
from ..registry.base import Registry
from .signin import CSRF_FIELD, SignIn, csrf_ok, csrf_token, set_csrf_cookie

__all__ = [
    "CSP",
    "HERE",
    "Console",
    "SecurityHeaders",
    "View",
    "base_path",
    "csrf_refusal",
    "make_registry",
    "page",
    "status_of",
]

logger = logging.getLogger("kiwi.console")
HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make Chromium send `Origin: null`
]


@dataclass
class Console:
    """What every page uses: the registry (acting as each request's person), how sign-in is
    verified, the templates, and the embedder search ranks by meaning with (loaded once)."""

    registry: Registry
    signin: SignIn
    settings: Settings
    templates: Environment = field(
        default_factory=lambda: Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
    )
    _embedder: Any = None
    _embedder_loaded: bool = False

    def embedder(self) -> Any:
        if not self._embedder_loaded:
            from ..search.combined import search_embedder

            self._embedder = search_embedder(self.settings)
            self._embedder_loaded = True
        return self._embedder

    def render(self, request: Request, name: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        """The template, with what every page shows (the person, the paths, the CSRF token)."""
        token, new = csrf_token(request)
        base = base_path(request)
        html = self.templates.get_template(name).render(
            base=base, csrf=token, csrf_field=CSRF_FIELD, request_path=request.url.path, **context
        )
        response = HTMLResponse(html, status_code=http_status, headers={"cache-control": "no-store"})
        if new:
            set_csrf_cookie(response, request, token, base or "/")
        return response

    def error(self, request: Request, status: int, message: str, hint: str | None = None) -> HTMLResponse:
        return self.render(request, "error.html", http_status=status, message=message, hint=hint, who=None)

    async def aclose(self) -> None:
        await self.registry.aclose()


View = Callable[[Console, Request, Principal], Awaitable[Response]]


def base_path(request: Request) -> str:
    """Where the console is mounted (/console), as links and cookies name it."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def status_of(error: KiwiError) -> int:
    if isinstance(error, NotFound):
        return 404
    if isinstance(error, Refused):
        return 403
    if isinstance(error, UsageError):
        return 400
    return 500 if not isinstance(error, KiwiError) else 502


def csrf_refusal(console: Console, request: Request, form: Any, hint: str | None) -> Response | None:
    """The 403 page for a form whose CSRF token is missing or wrong; None when it matches."""
    submitted = form.get(CSRF_FIELD)
    if csrf_ok(request, submitted if isinstance(submitted, str) else None):
        return None
    return console.error(request, 403, "this form was refused: its CSRF token is missing or wrong", hint)


def page(console: Console, view: View) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint of a view: signed in, CSRF checked on POST, acting as the person."""

    async def endpoint(request: Request) -> Response:
        principal = console.signin.principal(request)
        if principal is None:
            if request.headers.get("hx-request"):
                return Response(status_code=401, headers={"HX-Redirect": f"{base_path(request)}/signin"})
            return RedirectResponse(f"{base_path(request)}/signin", status_code=303)
        if request.method == "POST":
            refused = csrf_refusal(console, request, await request.form(), "reload the page and submit the form again")
            if refused is not None:
                return refused
        try:
            with acting_as(principal):
                return await view(console, request, principal)
        except KiwiError as e:
            return console.error(request, status_of(e), e.message, e.hint)

    return endpoint


class SecurityHeaders:
    """Adds the CSP and its companions to every answer (pages, static files, errors)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *(h for h in SECURITY_HEADERS if h[0] not in names),
                ]
            await send(message)

        await self.app(scope, receive, sending)


def make_registry(settings: Settings) -> Registry:
    """The console's own registry: acting as nobody until a request's `acting_as` names someone."""
    if settings.backend == "postgres":
        from ..registry.postgres import PostgresRegistry

        return PostgresRegistry(settings.database_url, principal=anon(), max_size=4)
    from ..registry import connect

    return connect(settings)
