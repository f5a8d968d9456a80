"""Signing in and out, and the console's front page (the approvals inbox).

A person signs in with an access token pasted into the form, or, when the server has a hosted
project configured (SUPABASE_URL and its anon key), with their email and password: the console
asks the project's Supabase Auth for a session (the password grant, runner/supabase_auth/) and
keeps its access token exactly as a pasted one, verified by the same checks. The password and
the refresh token are kept nowhere: when the access token expires, the person signs in again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...errors import KiwiError, UsageError
from ...principal import Principal
from ...supabase_auth.grants import sign_in
from ..base import csrf_refusal
from ..signin import forget, keep

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["routes"]


def routes(console: Console) -> list[Route]:
    from ..base import base_path

    async def front(request: Request) -> Response:
        return RedirectResponse(f"{base_path(request)}/approvals", status_code=303)

    settings = console.settings
    hosted = settings.supabase_url if settings.supabase_url and settings.supabase_key else None

    def form_page(request: Request, http_status: int = 200, problem: str | None = None, email: str = "") -> Response:
        return console.render(
            request, "signin.html", http_status=http_status, who=None, problem=problem, hosted=hosted, email=email
        )

    async def verified(form: Any) -> tuple[str, Principal]:
        """The token the form signs in with (pasted, or Supabase Auth's for the email and password)."""
        email, password = _text(form, "email"), form.get("password")
        if email or (isinstance(password, str) and password):
            if not hosted or not settings.supabase_key:
                raise UsageError("this console signs in with an access token: no hosted project is configured")
            if not email or not isinstance(password, str) or not password:
                raise UsageError("give both your email and your password")
            session = await run_in_threadpool(sign_in, hosted, settings.supabase_key, email, password)
            token = session.access_token
        else:
            token = _text(form, "token")
        return token, console.signin.verify(token)

    async def signin(request: Request) -> Response:
        if request.method == "GET":
            return form_page(request)
        form = await request.form()
        refused = csrf_refusal(console, request, form, "reload the page and sign in again")
        if refused is not None:
            return refused
        try:
            token, principal = await verified(form)
        except KiwiError as e:
            problem = f"{e.message}" + (f" ({e.hint})" if e.hint else "")
            return form_page(request, 401, problem, _text(form, "email"))
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


def _text(form: Any, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""
