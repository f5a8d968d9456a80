"""The MCP HTTP endpoint, tried as an attacker would (issue 12): it accepted any request.

Now every request needs a token the project signed, each call acts as the token's caller,
and the service key is refused unless the server was started with --admin. Real parts: a
real `kiwi serve --transport http` on a free loopback port, the real database, the official
MCP SDK client, JWTs signed with the local secret (and forged ones).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from runner import LOCAL_JWT_SECRET, LOCAL_OWNER_ID, PostgresRegistry, acting_as, from_claims
from runner import sign_token as sign
from runner.testing.http_serving import (
    Served,
    kiwi_http_server,
    mcp_client,
    service_role_token,
    unsigned_token,
    user_token,
)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "attacker", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("serve")) as s:
        yield s


@pytest.fixture(scope="module")
def served_admin(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("serve-admin"), "--admin") as s:
        yield s


def post(served: Served, token: str | None, body: dict[str, Any] = INITIALIZE, **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(served.url, json=body, headers={**HEADERS, **auth, **headers}, timeout=30)


def refused(response: httpx.Response, *words: str, metadata: bool = False) -> str:
    """A 401 saying `invalid_token` and why (each of `words`), naming the metadata only where
    there is some (`metadata`): the local stack runs no authorization server to sign in at."""
    assert response.status_code == 401, response.text
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert ("/.well-known/oauth-protected-resource/mcp" in challenge) == metadata, challenge
    description = response.json()["error_description"]
    for word in words:
        assert word in description, description
    return description


def test_no_token_is_401_saying_where_a_token_comes_from(served: Served) -> None:
    """Locally, `kiwi token`; never an authorization server nobody runs."""
    response = post(served, None)
    assert response.status_code == 401
    assert "resource_metadata" not in response.headers["WWW-Authenticate"]
    assert "kiwi token" in response.json()["error_description"]
    assert httpx.get(served.base + "/.well-known/oauth-protected-resource/mcp", timeout=30).status_code == 404


def test_a_hosted_projects_401_names_the_metadata_to_sign_in_with(database_url: str, tmp_path: Path) -> None:
    with kiwi_http_server(database_url, tmp_path, SUPABASE_URL="https://abc.supabase.co") as hosted:
        response = post(hosted, None)
        assert response.status_code == 401
        challenge = response.headers["WWW-Authenticate"]
        url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
        doc = httpx.get(url, timeout=30).json()
        assert doc["resource"] == hosted.url and doc["authorization_servers"] == ["https://abc.supabase.co/auth/v1"]
        refused(post(hosted, "garbage"), "not a JWT", metadata=True)


def _token(claims: dict[str, Any]) -> str:
    return sign(claims, LOCAL_JWT_SECRET, expires_in_s=600)


def _odd_role_token() -> str:
    return _token({"role": "supabase_admin", "sub": str(uuid.uuid4())})


@pytest.mark.parametrize(
    ("name", "token", "words"),
    [
        ("expired", lambda: user_token(expires_in_s=-3600), ("expired",)),
        ("signed with another secret", lambda: user_token(secret="not-this-projects-secret-" + "x" * 20), ()),
        ("garbage", lambda: "garbage", ("not a JWT",)),
        ("three garbage parts", lambda: "abc.def.ghi", ()),
        ("alg none", lambda: unsigned_token({"sub": LOCAL_OWNER_ID, "role": "authenticated"}), ("none",)),
        ("alg none as service_role", lambda: unsigned_token({"role": "service_role"}), ()),
        ("a role Kiwi does not act as", _odd_role_token, ("role",)),
        ("a user token naming no user", lambda: _token({"role": "authenticated", "sub": "root"}), ("sub",)),
    ],
)
def test_bad_tokens_are_401(served: Served, name: str, token: Any, words: tuple[str, ...]) -> None:
    refused(post(served, token()), *words)


def test_a_header_that_is_not_bearer_is_refused(served: Served) -> None:
    response = httpx.post(served.url, json=INITIALIZE, headers={**HEADERS, "Authorization": "Basic dXNlcjpwYXNz"})
    refused(response, "Bearer")


def test_the_service_key_is_refused_without_admin(served: Served) -> None:
    refused(post(served, service_role_token()), "service-role", "--admin")


async def test_the_sdk_client_with_a_forged_token_gets_nowhere(served: Served) -> None:
    with pytest.raises(Exception) as caught:
        async with mcp_client(served.url, user_token(secret="forged-" + "y" * 32)) as c:
            await c.list_tools()
    leaves, errors = [], [caught.value]
    while errors:
        error = errors.pop()
        children = getattr(error, "exceptions", None)
        if children:
            errors.extend(children)
        else:
            leaves.append(error)
    assert any("error response" in str(e) for e in leaves), leaves


async def test_a_user_token_lists_the_tools_and_searches(served: Served) -> None:
    async with mcp_client(served.url, user_token()) as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"search", "load", "execute", "help"}
        found = await c.call_tool("search", {"query": "hello"})
        assert not found.is_error, found.content


def test_a_session_opened_by_one_caller_cannot_be_used_by_another(served: Served) -> None:
    opened = post(served, user_token())
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    stolen = post(served, user_token(str(uuid.uuid4())), listing, **{"mcp-session-id": session})
    assert stolen.status_code == 404


# --- each call acts as its caller ------------------------------------------------------------


@pytest.fixture
def private_tool(database_url: str, conn: psycopg.Connection) -> Iterator[dict[str, Any]]:
    """User A owns a namespace holding a private tool (published as A); B owns another namespace."""
    users = {name: str(uuid.uuid4()) for name in ("a", "b")}
    namespaces = {name: f"h{name}_{uuid.uuid4().hex[:10]}" for name in users}
    for name, uid in users.items():
        conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (namespaces[name], uid))
    manifest = {
        "tool_id": f"secret_{uuid.uuid4().hex[:8]}",
        "namespace": namespaces["a"],
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "visibility": "private",
        "description": "a private tool of user A",
        "entrypoint": "run.sh",
    }
    files = [{"path": "run.sh", "content_text": "echo private", "is_entrypoint": True}]
    a = from_claims({"sub": users["a"], "role": "authenticated", "aud": "authenticated"})

    async def publish() -> None:
        registry = PostgresRegistry(database_url, principal=a)
        try:
            with acting_as(a):
                await registry.publish(manifest, files)
        finally:
            await registry.aclose()

    asyncio.run(publish())
    try:
        yield {"a": users["a"], "b": users["b"], "ref": f"{namespaces['a']}/{manifest['tool_id']}"}
    finally:
        for ns in namespaces.values():
            conn.execute("delete from tools where namespace = %s", (ns,))
            conn.execute("delete from namespaces where namespace = %s", (ns,))


async def load(served: Served, token: str, ref: str) -> tuple[bool, str]:
    async with mcp_client(served.url, token) as c:
        result = await c.call_tool("load", {"item_id": ref})
    text = " ".join(getattr(part, "text", "") for part in result.content)
    return not result.is_error, text


async def test_each_call_acts_as_its_caller(served: Served, private_tool: dict[str, Any]) -> None:
    ref = private_tool["ref"]
    ok, text = await load(served, user_token(private_tool["a"]), ref)
    assert ok, text
    for stranger in (user_token(private_tool["b"]), user_token(), _token({"role": "anon"})):
        ok, text = await load(served, stranger, ref)
        assert not ok and "not found" in text.lower(), text


async def test_with_admin_the_service_key_acts_as_admin_and_users_stay_users(
    served_admin: Served, private_tool: dict[str, Any]
) -> None:
    ref = private_tool["ref"]
    ok, text = await load(served_admin, service_role_token(), ref)
    assert ok, text
    ok, text = await load(served_admin, user_token(private_tool["b"]), ref)
    assert not ok and "not found" in text.lower(), text
    assert "service-role tokens accepted (--admin)" in served_admin.stderr()
