"""The console's ASGI app: its routes (runner/console/pages/), static files and error pages,
assembled over what every page stands on (base.py), and mounted at /console."""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..config import Settings
from ..registry.base import Registry
from . import pages
from .base import CSP, HERE, Console, SecurityHeaders, View, make_registry, page
from .signin import SignIn

__all__ = ["CSP", "Console", "View", "console_app", "mounted_console"]

logger = logging.getLogger("kiwi.console")


def console_app(settings: Settings, *, allow_admin: bool = False, registry: Registry | None = None) -> Starlette:
    """The console as an ASGI app, to be mounted at /console (app.state.console: its Console,
    whose `aclose()` closes the registry it made)."""
    console = Console(registry or make_registry(settings), SignIn(settings, allow_admin), settings)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = "no such page" if status == 404 else "this request was refused"
        if status == 405:
            message = "that method is not allowed here"
        return console.error(request, status, message, None)

    async def failed(request: Request, exc: Exception) -> Response:
        logger.exception("console: %s %s failed", request.method, request.url.path)
        return console.error(request, 500, "something went wrong on the server; it is logged there", None)

    routes: list[Route | Mount] = [
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        *pages.routes(console, page),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found, Exception: failed})
    app.state.console = console
    return app


def mounted_console(settings: Settings, *, allow_admin: bool = False) -> tuple[Mount, Console]:
    """The console mounted at /console, with its security headers, for another app's routes."""
    app = console_app(settings, allow_admin=allow_admin)
    console: Console = app.state.console
    return Mount("/console", app=SecurityHeaders(app)), console
