"""A FAKE Supabase Auth (GoTrue) HTTP server, for `kiwi login` against a local process.

It answers the few endpoints `kiwi login`, the refresh and `kiwi logout` call, the way Supabase
Auth does: POST /auth/v1/token?grant_type=password ({"email", "password"}) and
?grant_type=refresh_token ({"refresh_token"}), POST /auth/v1/logout (a bearer access token),
each behind the project's anon key in the `apikey` header. Its access tokens are real JWTs
signed (HS256) with the project's JWT secret, the local stack's by default, with the claims
Supabase Auth puts in them, so the registry's database really accepts them. Refresh tokens
rotate and are spent once used; errors have Supabase Auth's shape ({"code", "error_code",
"msg"}). `log` keeps each grant, for assertions.

One uvicorn server in a thread, on a free loopback port, until the block ends.
"""

from __future__ import annotations

import secrets
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from runner import LOCAL_JWT_SECRET
from runner import sign_token as sign
from tests.serve_in_thread import serving

ANON_KEY = "fake-anon-key-of-the-test-project"


@dataclass
class FakeGoTrue:
    base: str = ""  # the project's URL (SUPABASE_URL); Supabase Auth is under /auth/v1
    secret: str = LOCAL_JWT_SECRET
    access_ttl_s: int = 3600
    users: dict[str, dict[str, str]] = field(default_factory=dict)  # email -> {"id", "password"}
    refresh_tokens: dict[str, dict[str, str]] = field(default_factory=dict)  # live ones -> {"user", "session"}
    log: list[str] = field(default_factory=list)  # "password", "refresh_token", "logout", and refusals

    def add_user(self, email: str, password: str) -> str:
        user_id = str(uuid.uuid4())
        self.users[email] = {"id": user_id, "password": password}
        return user_id

    def spend_every_refresh_token(self) -> None:
        """As when the project's sessions end (a time box, a sign-out elsewhere)."""
        self.refresh_tokens.clear()

    def _user_of(self, user_id: str) -> tuple[str, dict[str, str]]:
        return next((email, u) for email, u in self.users.items() if u["id"] == user_id)

    def _session(self, email: str, session_id: str) -> dict[str, Any]:
        user = self.users[email]
        claims = {
            "iss": f"{self.base}/auth/v1",
            "sub": user["id"],
            "aud": "authenticated",
            "role": "authenticated",
            "email": email,
            "session_id": session_id,
            "aal": "aal1",
            "is_anonymous": False,
        }
        token = sign(claims, self.secret, expires_in_s=self.access_ttl_s)
        refresh = secrets.token_urlsafe(12)
        self.refresh_tokens[refresh] = {"user": user["id"], "session": session_id}
        return {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": self.access_ttl_s,
            "expires_at": int(time.time()) + self.access_ttl_s,
            "refresh_token": refresh,
            "user": {"id": user["id"], "aud": "authenticated", "role": "authenticated", "email": email},
        }

    async def token(self, request: Request) -> Response:
        grant = request.query_params.get("grant_type")
        body = await request.json()
        if grant == "password":
            email, password = str(body.get("email", "")), str(body.get("password", ""))
            user = self.users.get(email)
            if user is None or user["password"] != password:
                self.log.append("password refused")
                return _error(400, "invalid_credentials", "Invalid login credentials")
            self.log.append("password")
            return JSONResponse(self._session(email, str(uuid.uuid4())))
        if grant == "refresh_token":
            spent = self.refresh_tokens.pop(str(body.get("refresh_token", "")), None)
            if spent is None:
                self.log.append("refresh_token refused")
                return _error(400, "refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found")
            self.log.append("refresh_token")
            email, _ = self._user_of(spent["user"])
            return JSONResponse(self._session(email, spent["session"]))
        return _error(400, "unsupported_grant_type", f"unsupported grant_type {grant!r}")

    async def logout(self, request: Request) -> Response:
        import jwt

        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        try:
            claims = jwt.decode(bearer, self.secret, algorithms=["HS256"], audience="authenticated")
        except jwt.PyJWTError:
            return _error(401, "bad_jwt", "invalid JWT")
        self.log.append(f"logout {request.query_params.get('scope', 'global')}")
        for refresh, held in list(self.refresh_tokens.items()):
            if held["session"] == claims["session_id"]:
                del self.refresh_tokens[refresh]
        return Response(status_code=204)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": status, "error_code": code, "msg": message}, status_code=status)


def _asgi(fake: FakeGoTrue) -> Any:
    handlers = {("POST", "/auth/v1/token"): fake.token, ("POST", "/auth/v1/logout"): fake.logout}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        if request.headers.get("apikey") != ANON_KEY:  # the API gateway's check, before Supabase Auth
            response: Response = JSONResponse({"message": "Invalid API key"}, status_code=401)
        elif (handler := handlers.get((scope["method"], scope["path"]))) is not None:
            response = await handler(request)
        else:
            response = _error(404, "not_found", "no such endpoint")
        await response(scope, receive, send)

    return app


@contextmanager
def fake_gotrue(**options: Any) -> Iterator[FakeGoTrue]:
    """The fake, listening on a free loopback port, until the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake = FakeGoTrue(base=f"http://127.0.0.1:{port}", **options)
    with serving(_asgi(fake), port, what="the fake Supabase Auth"):
        yield fake
