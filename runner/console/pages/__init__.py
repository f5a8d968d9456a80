"""The console's pages, one module per subject; `routes` lists them all."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import approvals, queued, registry, runs, server_signin, servers, session

if TYPE_CHECKING:
    from ..base import Console, View

__all__ = ["routes"]

Guard = Callable[["Console", "View"], Callable[[Request], Awaitable[Response]]]


def routes(console: Console, guard: Guard) -> list[Route]:
    """Every page's route: sign-in is open, the rest pass the guard (signed in, CSRF, RLS)."""
    found: list[Route] = [*session.routes(console), *server_signin.callback_routes(console)]
    for module in (approvals, runs, queued, registry, servers, server_signin):
        for path, view, methods in module.PAGES:
            found.append(Route(path, endpoint=guard(console, view), methods=list(methods)))
    return found
