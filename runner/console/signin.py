"""Who a console request acts as, and the forms' CSRF tokens.

A person signs in as an MCP caller does: with an access token (a Supabase Auth session's, or
locally what `kiwi token` prints), pasted into the sign-in form or, for a hosted project, the
one its Supabase Auth answers an email and password with (pages/session.py). The token is
verified as the MCP endpoint verifies bearer tokens (runner/principal.py `from_token`: the
project's JWT secret or JWKS, the audience, the longest life) and kept in an HttpOnly,
SameSite=Strict cookie scoped to the console's path; every request verifies it again and acts
as its principal, so an expired or revoked-by-rotation token signs the person out. Service-role
tokens are refused unless the console was started to accept them (`kiwi serve --admin`).

CSRF: every form carries the value of a random HttpOnly, SameSite=Strict cookie (double submit);
a POST whose field does not match it, or that comes from another origin, is refused (403).
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from ..config import Settings
from ..errors import KiwiError, Refused
from ..principal import Principal, from_token

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "SESSION_COOKIE",
    "SignIn",
    "csrf_ok",
    "csrf_token",
    "forget",
    "keep",
    "same_origin",
    "set_csrf_cookie",
]

SESSION_COOKIE = "kiwi_console_session"
CSRF_COOKIE = "kiwi_console_csrf"
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class SignIn:
    """How the console verifies the tokens people sign in with."""

    settings: Settings
    allow_admin: bool = False

    def verify(self, token: str) -> Principal:
        """The token's principal; raises why it is refused (a KiwiError)."""
        principal = from_token(
            token.strip(),
            secret=self.settings.jwt_secret,
            jwks_url=self.settings.jwks_url,
            audience=self.settings.jwt_audience,
            max_lifetime_s=self.settings.jwt_max_lifetime_s,
        )
        if principal.is_admin and not self.allow_admin:
            raise Refused(
                "service-role tokens are refused: this console was not started with --admin",
                hint="sign in as a user: `kiwi token` prints a token for the local stack's owner",
            )
        if principal.user_id is None and not principal.is_admin:
            raise Refused("an anonymous token signs nobody in", hint="sign in with a user's access token")
        return principal

    def principal(self, request: Request) -> Principal | None:
        """The signed-in person of the request, or None (no cookie, or a token no longer good)."""
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            return None
        try:
            return self.verify(token)
        except KiwiError:
            return None


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def keep(response: Response, request: Request, token: str, principal: Principal, path: str) -> None:
    """Set the session cookie: the token, for as long as it lives."""
    exp = principal.claims.get("exp")
    max_age = max(1, int(exp - time.time())) if isinstance(exp, (int, float)) else None
    response.set_cookie(
        SESSION_COOKIE,
        token.strip(),
        max_age=max_age,
        path=path,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def forget(response: Response, path: str) -> None:
    response.delete_cookie(SESSION_COOKIE, path=path, httponly=True, samesite="strict")


def csrf_token(request: Request) -> tuple[str, bool]:
    """The request's CSRF token, and whether it is new (the cookie must then be set)."""
    known = request.cookies.get(CSRF_COOKIE)
    if known and len(known) == 64:
        return known, False
    return secrets.token_hex(32), True


def set_csrf_cookie(response: Response, request: Request, token: str, path: str) -> None:
    response.set_cookie(CSRF_COOKIE, token, path=path, httponly=True, samesite="strict", secure=_secure(request))


def csrf_ok(request: Request, submitted: str | None) -> bool:
    """A POST's field matches its cookie, and it comes from this origin (when it says)."""
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not submitted or not hmac.compare_digest(cookie.encode(), submitted.encode()):
        return False
    return same_origin(request)


def same_origin(request: Request) -> bool:
    """The Origin header, where the browser sends one, names this server."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1] == host
