"""Signing in and out, and the console's front page (the approvals inbox)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...errors import KiwiError
from ..signin import CSRF_FIELD, csrf_ok, forget, keep

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["routes"]


def routes(console: Console) -> list[Route]:
    from ..base import base_path

    async def front(request: Request) -> Response:
        return RedirectResponse(f"{base_path(request)}/approvals", status_code=303)

    async def signin(request: Request) -> Response:
        if request.method == "GET":
            return console.render(request, "signin.html", who=None, problem=None)
        form = await request.form()
        submitted = form.get(CSRF_FIELD)
        if not csrf_ok(request, submitted if isinstance(submitted, str) else None):
            return console.error(
                request,
                403,
                "this form was refused: its CSRF token is missing or wrong",
                "reload the page and sign in again",
            )
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        try:
            principal = console.signin.verify(token)
        except KiwiError as e:
            problem = f"{e.message}" + (f" ({e.hint})" if e.hint else "")
            return console.render(request, "signin.html", http_status=401, who=None, problem=problem)
        response = RedirectResponse(f"{base_path(request)}/approvals", status_code=303)
        keep(response, request, token, principal, base_path(request) or "/")
        return response

    async def signout(request: Request) -> Response:
        form = await request.form()
        submitted = form.get(CSRF_FIELD)
        if not csrf_ok(request, submitted if isinstance(submitted, str) else None):
            return console.error(request, 403, "this form was refused: its CSRF token is missing or wrong", None)
        response = RedirectResponse(f"{base_path(request)}/signin", status_code=303)
        forget(response, base_path(request) or "/")
        return response

    return [
        Route("/", endpoint=front, methods=["GET"]),
        Route("/signin", endpoint=signin, methods=["GET", "POST"]),
        Route("/signout", endpoint=signout, methods=["POST"]),
    ]
