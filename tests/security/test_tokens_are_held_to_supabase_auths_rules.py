"""Tokens are as strict as Supabase Auth's (issue 26: "tokens with any `aud` and with `exp` in
the year 9999 are accepted").

A user's access token must carry the audience `authenticated` (another only when the
deployment says so: KIWI_JWT_AUDIENCE) and live at most a day by default
(KIWI_JWT_MAX_LIFETIME): from its iat to its exp, and from now to its exp, which judges a token
without iat. The project's API keys (anon, service_role: no user) stay long-lived and carry
no audience, as Supabase issues them. `kiwi token` mints only what a server accepts.

Real parts: tokens signed with the local secret, verified as the CLI and a real
`kiwi serve --transport http` process verify them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from runner import LOCAL_JWT_SECRET, LOCAL_OWNER_ID, Refused, Settings, from_token
from runner.testing.http_serving import Served, kiwi_http_server
from tests.kiwi_cli import kiwi_env, run_kiwi

YEAR_9999 = 253402300799
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def signed(**claims: Any) -> str:
    """A token of exactly these claims (None: left out), signed with the local secret. The
    cases below mint theirs when they run (a lambda), not when pytest collects them: a token
    made at collection had expired by the time a slow suite reached it."""
    now = int(time.time())
    base: dict[str, Any] = {"sub": LOCAL_OWNER_ID, "role": "authenticated", "aud": "authenticated"}
    base |= {"iat": now, "exp": now + 600}
    return jwt.encode({k: v for k, v in (base | claims).items() if v is not None}, LOCAL_JWT_SECRET, "HS256")


def verify(token: str, **settings: str) -> Any:
    """Verify as the CLI does (KIWI_ACCESS_TOKEN), under these settings."""
    env = {"KIWI_ACCESS_TOKEN": token, **settings}
    return Settings.load(env, Path("/nonexistent/config.toml")).principal()


REFUSED = [
    ("another audience", lambda: signed(aud="somebody-else"), "audience 'somebody-else'"),
    ("a list of other audiences", lambda: signed(aud=["a", "b"]), "audience ['a', 'b']"),
    ("no audience", lambda: signed(aud=None), "names no audience"),
    ("exp in the year 9999", lambda: signed(exp=YEAR_9999), "longer than the 24 h"),
    ("exp in 9999 and no iat", lambda: signed(exp=YEAR_9999, iat=None), "longer than the 24 h"),
    ("a week and a second", lambda: signed(exp=int(time.time()) + 7 * 86400 + 1), "longer than the 24 h"),
    ("no iat, 2 days left", lambda: signed(iat=None, exp=int(time.time()) + 2 * 86400), "valid for another"),
    ("an anon key for another audience", lambda: signed(role="anon", sub=None, aud="other"), "audience 'other'"),
]


@pytest.mark.parametrize(("name", "token", "words"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_token_beyond_supabase_auths_rules_is_refused_naming_why(
    name: str, token: Callable[[], str], words: str
) -> None:
    with pytest.raises(Refused) as refused:
        verify(token())
    assert words in refused.value.message, refused.value.message
    assert "KIWI_JWT" in (refused.value.hint or "")


ACCEPTED = [
    ("a Supabase Auth token (an hour)", lambda: signed(exp=int(time.time()) + 3600)),
    ("a day, to the second", lambda: signed(exp=int(time.time()) + 86400)),
    ("no iat, an hour left", lambda: signed(iat=None, exp=int(time.time()) + 3600)),
    ("the audience among others", lambda: signed(aud=["authenticated", "other"])),
    ("the anon key: no audience, years long", lambda: signed(role="anon", sub=None, aud=None, exp=YEAR_9999)),
    (
        "the service key: no audience, years long",
        lambda: signed(role="service_role", sub=None, aud=None, exp=YEAR_9999),
    ),
]


@pytest.mark.parametrize(("name", "token"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_what_supabase_issues_is_accepted(name: str, token: Callable[[], str]) -> None:
    assert verify(token()).role in ("authenticated", "anon", "service_role")


def test_a_deployment_may_name_its_own_audience_and_lifetime() -> None:
    theirs = signed(aud="my-app", exp=int(time.time()) + 3 * 86400)
    principal = verify(theirs, KIWI_JWT_AUDIENCE="my-app", KIWI_JWT_MAX_LIFETIME=str(7 * 86400))
    assert principal.user_id == LOCAL_OWNER_ID
    with pytest.raises(Refused, match="audience 'my-app'"):
        verify(theirs, KIWI_JWT_MAX_LIFETIME=str(7 * 86400))
    with pytest.raises(Refused, match="longer than"):
        verify(theirs, KIWI_JWT_AUDIENCE="my-app")
    with pytest.raises(Refused, match="accepts tokens for 'my-app'"):
        verify(signed(), KIWI_JWT_AUDIENCE="my-app")


def test_the_verified_token_cache_holds_a_token_to_each_verifiers_rules() -> None:
    long_lived = signed(exp=int(time.time()) + 3 * 86400)
    assert from_token(long_lived, secret=LOCAL_JWT_SECRET, max_lifetime_s=7 * 86400).user_id == LOCAL_OWNER_ID
    with pytest.raises(Refused, match="longer than"):
        from_token(long_lived, secret=LOCAL_JWT_SECRET)


# --- over HTTP ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("tokens")) as s:
        yield s


def post(served: Served, token: str) -> httpx.Response:
    return httpx.post(served.url, json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=30)


@pytest.mark.parametrize(
    ("name", "token", "words"),
    [
        ("another audience", lambda: signed(aud="somebody-else"), "audience"),
        ("exp in the year 9999", lambda: signed(exp=YEAR_9999), "longer than"),
        ("exp in 9999 and no iat", lambda: signed(exp=YEAR_9999, iat=None), "longer than"),
    ],
)
def test_the_http_endpoint_refuses_them_with_a_401_saying_why(
    served: Served, name: str, token: Callable[[], str], words: str
) -> None:
    response = post(served, token())
    assert response.status_code == 401, response.text
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    assert words in response.json()["error_description"]


def test_the_http_endpoint_serves_a_supabase_auth_token(served: Served) -> None:
    response = post(served, signed(exp=int(time.time()) + 3600))
    assert response.status_code == 200, response.text


# --- kiwi token -----------------------------------------------------------------------------


def test_kiwi_token_mints_what_the_server_accepts_and_no_longer(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path / "cache")
    minted = run_kiwi(("token",), cwd=tmp_path, env=env)
    assert minted.code == 0, minted.err
    claims = jwt.decode(minted.out.strip(), LOCAL_JWT_SECRET, algorithms=["HS256"], audience="authenticated")
    assert claims["exp"] - claims["iat"] <= 86400
    assert verify(minted.out.strip()).user_id == LOCAL_OWNER_ID
    theirs = run_kiwi(("token", "--user", str(uuid.uuid4())), cwd=tmp_path, env={**env, "KIWI_JWT_AUDIENCE": "my-app"})
    assert theirs.code == 0, theirs.err
    assert verify(theirs.out.strip(), KIWI_JWT_AUDIENCE="my-app").role == "authenticated"
    too_long = run_kiwi(("token", "--expires", str(30 * 86400)), cwd=tmp_path, env=env)
    assert too_long.code == 2 and "KIWI_JWT_MAX_LIFETIME" in too_long.err and "Traceback" not in too_long.err
