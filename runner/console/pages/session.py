"""Signing in and out, and the console's front page (the approvals inbox)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...errors import KiwiError
from ..base import csrf_refusal
from ..signin import forget, keep

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
        refused = csrf_refusal(console, request, form, "reload the page and sign in again")
        if refused is not None:
            return refused
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
        refused = csrf_refusal(console, request, await request.form(), None)
        if refused is not None:
            return refused
        response = RedirectResponse(f"{base_path(request)}/signin", status_code=303)
        forget(response, base_path(request) or "/")
        return response

    return [
        Route("/", endpoint=front, methods=["GET"]),
        Route("/signin", endpoint=signin, methods=["GET", "POST"]),
        Route("/signout", endpoint=signout, methods=["POST"]),
    ]
