"""Supabase Auth (GoTrue) over HTTP: a hosted project's user signed in by email and password.

`sign_in` asks `<SUPABASE_URL>/auth/v1/token?grant_type=password` (the project's anon key as
`apikey`) for a `Session`: an access token, its expiry and a refresh token. `refresh` spends the
refresh token for a new access token (`grant_type=refresh_token`; the refresh token rotates),
`revoke` signs the session out (scope local). `kiwi login` (runner/cli/session.py) keeps the
session in a file; the web console's sign-in form (runner/console/pages/session.py) keeps only
its access token, in the console's cookie.

Errors are one line each (a KiwiError): a wrong password is `Refused`, an unreachable Supabase
Auth or one that answers oddly `RegistryUnavailable`. httpx loads only when Supabase Auth is
called.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..errors import KiwiError, Refused, RegistryUnavailable

__all__ = ["REFRESH_MARGIN_S", "TIMEOUT_S", "Session", "refresh", "revoke", "sign_in"]

# a token this close to its expiry is refreshed before it is used: a command may take this long
REFRESH_MARGIN_S = 60
TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Session:
    """What Supabase Auth answered a sign-in (or a refresh) with, and whose project it is."""

    url: str  # the project's SUPABASE_URL, without a trailing slash
    access_token: str
    refresh_token: str
    expires_at: int  # Unix seconds
    user_id: str
    email: str | None = None

    def expired(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.expires_at - REFRESH_MARGIN_S

    def describe(self) -> str:
        return f"{self.email or 'user'} ({self.user_id})"


def _auth_url(url: str) -> str:
    return url.rstrip("/") + "/auth/v1"


def _call(url: str, key: str, path: str, body: dict[str, Any] | None, token: str | None = None) -> Any:
    """POST to the project's Supabase Auth; the answer's JSON, or a one-line KiwiError."""
    import httpx  # only when Supabase Auth is called

    headers = {"apikey": key, "Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    where = _auth_url(url)
    try:
        response = httpx.post(where + path, json=body, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as e:
        reason = str(e) or type(e).__name__
        raise RegistryUnavailable(f"cannot reach Supabase Auth at {where} ({reason}): check SUPABASE_URL") from None
    if response.status_code >= 400:
        raise _refusal(response, where)
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise RegistryUnavailable(
            f"{where} answered {response.status_code} with no JSON: is SUPABASE_URL the project's URL?"
        ) from None


class _Rejected(Refused):
    """Supabase Auth said no: `reason` is its message, `code` its error code."""

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(f"Supabase Auth refused: {reason}")
        self.reason = reason
        self.code = code


def _refusal(response: Any, where: str) -> KiwiError:
    """Supabase Auth's error ({"error_code", "msg"}, or OAuth's {"error", "error_description"})."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    code = str(body.get("error_code") or body.get("error") or "")
    reason = str(body.get("msg") or body.get("error_description") or body.get("message") or response.reason_phrase)
    if response.status_code >= 500 or response.status_code == 404:
        return RegistryUnavailable(f"Supabase Auth at {where} answered {response.status_code}: {reason}")
    return _Rejected(reason, code)


def _session(url: str, answer: Any, previous: Session | None = None) -> Session:
    """The Session of a token answer (a refresh may leave the user out)."""
    if not isinstance(answer, dict) or not answer.get("access_token") or not answer.get("refresh_token"):
        raise RegistryUnavailable("Supabase Auth answered without an access and a refresh token")
    found = answer.get("user")
    user: dict[str, Any] = found if isinstance(found, dict) else {}
    expires_at = answer.get("expires_at")
    if not isinstance(expires_at, int | float):
        expires_at = time.time() + float(answer.get("expires_in") or 3600)
    user_id = str(user.get("id") or (previous.user_id if previous else "") or _claim(answer["access_token"], "sub"))
    email = user.get("email") or (previous.email if previous else None)
    return Session(
        url=url.rstrip("/"),
        access_token=str(answer["access_token"]),
        refresh_token=str(answer["refresh_token"]),
        expires_at=int(expires_at),
        user_id=user_id,
        email=str(email) if email else None,
    )


def _claim(token: str, name: str) -> str:
    """A claim of a token read without verifying it (only to name the user; the server verifies)."""
    import base64

    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return str(claims.get(name) or "")
    except (IndexError, ValueError):
        return ""


def sign_in(url: str, key: str, email: str, password: str) -> Session:
    """Email and password for a session (Supabase Auth's password grant)."""
    try:
        answer = _call(url, key, "/token?grant_type=password", {"email": email, "password": password})
    except _Rejected as e:
        raise Refused(f"sign-in refused for {email}: {e.reason}") from None
    return _session(url, answer)


def refresh(session: Session, key: str, again: str = "sign in again") -> Session:
    """A new access token for the session (Supabase Auth's refresh grant; the refresh token rotates)."""
    try:
        answer = _call(session.url, key, "/token?grant_type=refresh_token", {"refresh_token": session.refresh_token})
    except _Rejected as e:
        raise Refused(f"your session has expired ({e.reason}): {again}") from None
    return _session(session.url, answer, session)


def revoke(session: Session, key: str) -> None:
    """Sign this session out at Supabase Auth (scope local: the user's other sessions stay)."""
    _call(session.url, key, "/logout?scope=local", None, token=session.access_token)
